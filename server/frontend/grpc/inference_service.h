// gatescope.v1.Inference over the callback API: handlers validate, hand work to the
// model's scheduler and return at once; the scheduler's worker finishes each call.
#pragma once

#include <atomic>
#include <cstdint>

#include "gatescope/v1/inference.grpc.pb.h"
#include "server/repository/model_repository.h"

namespace gatescope {

class InferenceService final : public ::gatescope::v1::Inference::CallbackService {
 public:
  // `repository` is not owned and must outlive the gRPC server. Explain requests whose
  // peak bytes exceed `explain_max_bytes` get RESOURCE_EXHAUSTED.
  InferenceService(const ModelRepository* repository, int64_t explain_max_bytes)
      : repository_(repository), explain_max_bytes_(explain_max_bytes) {}

  // After this, new Predict calls get UNAVAILABLE (graceful drain). Thread-safe.
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
  const ModelRepository* repository_;
  const int64_t explain_max_bytes_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace gatescope
