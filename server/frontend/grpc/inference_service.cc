#include "server/frontend/grpc/inference_service.h"

#include "server/frontend/grpc/authorize.h"
#include "server/frontend/grpc/kserve_service.h"  // FinishNow, FinishReactor, ContextOf
#include "server/frontend/grpc/status_mapping.h"
#include "server/frontend/grpc/wire_message.h"

namespace gatescope {

InferenceService::InferenceService(const V1Core* core, const AccessControl* access)
    : core_(core), access_(access) {
  constexpr absl::string_view kService = "gatescope.v1.Inference";
  MarkMethodCallback(MethodIndex(kService, "Predict"),
                     ParsingUnaryHandler(this, &InferenceService::Predict));
  MarkMethodCallback(MethodIndex(kService, "Explain"),
                     ParsingUnaryHandler(this, &InferenceService::Explain));
  MarkMethodCallback(MethodIndex(kService, "ListModels"),
                     ParsingUnaryHandler(this, &InferenceService::ListModels));
  MarkMethodCallback(MethodIndex(kService, "GetModelMetadata"),
                     ParsingUnaryHandler(this, &InferenceService::GetModelMetadata));
}

grpc::ServerUnaryReactor* InferenceService::Predict(grpc::CallbackServerContext* context,
                                                    const v1::PredictRequest* request,
                                                    v1::PredictResponse* response) {
  if (absl::Status st = Authorize(*context, access_, Access::kInference); !st.ok()) {
    return FinishNow(context, st);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  core_->Predict(request, response, ContextOf(context), FinishReactor(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Explain(grpc::CallbackServerContext* context,
                                                    const v1::ExplainRequest* request,
                                                    v1::ExplainResponse* response) {
  if (absl::Status st = Authorize(*context, access_, Access::kInference); !st.ok()) {
    return FinishNow(context, st);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  core_->Explain(request, response, ContextOf(context), FinishReactor(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ListModels(grpc::CallbackServerContext* context,
                                                       const v1::ListModelsRequest*,
                                                       v1::ListModelsResponse* response) {
  if (absl::Status st = Authorize(*context, access_, Access::kMetadata); !st.ok()) {
    return FinishNow(context, st);
  }
  core_->ListModels(response);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::GetModelMetadata(
    grpc::CallbackServerContext* context, const v1::ModelMetadataRequest* request,
    v1::ModelMetadataResponse* response) {
  if (absl::Status st = Authorize(*context, access_, Access::kMetadata); !st.ok()) {
    return FinishNow(context, st);
  }
  return FinishNow(context, core_->GetModelMetadata(*request, response));
}

}  // namespace gatescope
