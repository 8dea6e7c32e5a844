// gatescope.v1.Inference over gRPC's callback API: each RPC checks the caller's token and
// hands its messages to V1Core (frontend/core/v1_core.h), which answers for every transport.
#pragma once

#include "gatescope/v1/inference.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/frontend/core/v1_core.h"

namespace gatescope {

class InferenceService final : public ::gatescope::v1::Inference::CallbackService {
 public:
  // `core` and `access` (null: every call allowed) are not owned and must outlive the gRPC
  // server. Requests are parsed by the server (wire_message.h): a malformed one gets
  // INVALID_ARGUMENT.
  InferenceService(const V1Core* core, const AccessControl* access = nullptr);

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
  const V1Core* const core_;
  const AccessControl* const access_;  // may be null
};

}  // namespace gatescope
