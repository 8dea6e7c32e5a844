// The gatescope.v1 calls as the server answers them, whatever the transport (the gRPC
// service in frontend/grpc, the REST routes in frontend/http): handlers find the model, let
// its task check the request and make its job, queue it and return at once; the model
// instance's worker finishes each call. No gRPC, no HTTP.
#pragma once

#include <atomic>

#include "absl/status/status.h"
#include "gatescope/v1/inference.pb.h"
#include "server/common/clock.h"
#include "server/frontend/core/model_call.h"
#include "server/repository/model_repository.h"

namespace gatescope {

class V1Core {
 public:
  // `repository` and `clock` (call latencies) are not owned and must outlive this.
  V1Core(const ModelRepository* repository, const Clock* clock)
      : repository_(repository), clock_(clock) {}

  // After this, new Predict and Explain calls get UNAVAILABLE (graceful drain).
  // Thread-safe.
  void BeginShutdown() { shutting_down_.store(true); }

  // Queue the call and return at once; `finish` runs once, when `response` is complete or
  // with the error. `request` and `response` must outlive `finish`.
  void Predict(const ::gatescope::v1::PredictRequest* request,
               ::gatescope::v1::PredictResponse* response, const CallContext& context,
               FinishCall finish) const;
  void Explain(const ::gatescope::v1::ExplainRequest* request,
               ::gatescope::v1::ExplainResponse* response, const CallContext& context,
               FinishCall finish) const;

  // Immediate answers.
  void ListModels(::gatescope::v1::ListModelsResponse* response) const;
  absl::Status GetModelMetadata(const ::gatescope::v1::ModelMetadataRequest& request,
                                ::gatescope::v1::ModelMetadataResponse* response) const;

 private:
  // The shared body of Predict and Explain: `make_job(task, done)` is the task's method;
  // the call is recorded under `kind`.
  template <typename Request, typename Response, typename MakeJob>
  void Serve(RequestKind kind, const Request& request, Response* response,
             const absl::StatusOr<Scheduling>& scheduling, const CallContext& context,
             FinishCall finish, MakeJob make_job) const;

  const ModelRepository* const repository_;
  const Clock* const clock_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace gatescope
