// gatescope.v1.Inference over the callback API: handlers find the model, let its task
// check the request and make its job, queue it and return at once; the model instance's
// worker finishes each call.
#pragma once

#include <atomic>

#include "gatescope/v1/inference.grpc.pb.h"
#include "server/api/request_scheduling.h"
#include "server/auth/access_control.h"
#include "server/repository/model_repository.h"

namespace gatescope {

class InferenceService final : public ::gatescope::v1::Inference::CallbackService {
 public:
  // `repository`, `clock` (call latencies) and `access` (null: every call allowed) are not
  // owned and must outlive the gRPC server.
  // Requests are parsed by the server (wire_message.h): a malformed one gets
  // INVALID_ARGUMENT.
  InferenceService(const ModelRepository* repository, const Clock* clock,
                   const AccessControl* access = nullptr);

  // After this, new Predict and Explain calls get UNAVAILABLE (graceful drain).
  // Thread-safe.
  void BeginShutdown() { shutting_down_.store(true); }

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const ::gatescope::v1::PredictRequest* request,
                                    ::gatescope::v1::PredictResponse* response) override;
  grpc::ServerUnaryReactor* Explain(grpc::CallbackServerContext* context,
                                    const ::gatescope::v1::ExplainRequest* request,
                                    ::gatescope::v1::ExplainResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const ::gatescope::v1::ListModelsRequest* request,
                                       ::gatescope::v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModelMetadata(
      grpc::CallbackServerContext* context, const ::gatescope::v1::ModelMetadataRequest* request,
      ::gatescope::v1::ModelMetadataResponse* response) override;

 private:
  // The shared body of Predict and Explain: `make_job(task, done)` is the task's method.
  template <typename Request, typename Response, typename MakeJob>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, const Request& request,
                                  Response* response,
                                  const absl::StatusOr<Scheduling>& scheduling, MakeJob make_job);

  const ModelRepository* repository_;
  const Clock* const clock_;
  const AccessControl* const access_;  // may be null
  std::atomic<bool> shutting_down_{false};
};

}  // namespace gatescope
