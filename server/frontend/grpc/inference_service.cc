#include "server/frontend/grpc/inference_service.h"

#include "server/api/request_scheduling.h"
#include "server/frontend/grpc/authorize.h"
#include "server/frontend/grpc/model_call.h"
#include "server/frontend/grpc/status_mapping.h"
#include "server/frontend/grpc/wire_message.h"

namespace gatescope {

InferenceService::InferenceService(const ModelRepository* repository, const Clock* clock,
                                   const AccessControl* access)
    : repository_(repository), clock_(clock), access_(access) {
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

template <typename Request, typename Response, typename MakeJob>
grpc::ServerUnaryReactor* InferenceService::Serve(grpc::CallbackServerContext* context,
                                                  const Request& request, Response* response,
                                                  const absl::StatusOr<Scheduling>& scheduling,
                                                  MakeJob make_job) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status st = Authorize(*context, access_, Access::kInference); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  auto call = BeginModelCall(reactor, *repository_, request.model_name(), request.model_version(),
                             shutting_down_.load(), clock_);
  if (!call) return reactor;
  if (!scheduling.ok()) {
    call->Finish(scheduling.status());
    return reactor;
  }
  response->set_model_name(call->model->name);
  response->set_model_version(call->model->version);
  absl::StatusOr<std::unique_ptr<InferenceJob>> job = make_job(call->task(), call->Done());
  if (!job.ok()) {
    call->Finish(job.status());
    return reactor;
  }
  Submit(*call, context, *std::move(job), *scheduling).IgnoreError();  // refused: finished
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Predict(grpc::CallbackServerContext* context,
                                                    const v1::PredictRequest* request,
                                                    v1::PredictResponse* response) {
  return Serve(context, *request, response, SchedulingOf(*request),
               [&](const Task& task, CallDone done) {
    return task.Predict(*request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* InferenceService::Explain(grpc::CallbackServerContext* context,
                                                    const v1::ExplainRequest* request,
                                                    v1::ExplainResponse* response) {
  return Serve(context, *request, response, Scheduling(), [&](const Task& task, CallDone done) {
    return task.Explain(*request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* InferenceService::ListModels(
    grpc::CallbackServerContext* context, const v1::ListModelsRequest*,
    v1::ListModelsResponse* response) {
  if (absl::Status st = Authorize(*context, access_, Access::kMetadata); !st.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  for (const auto& model : repository_->List()) {
    auto* m = response->add_models();
    m->set_name(model->name);
    m->set_version(model->version);
    m->set_ready(model->ready());
    m->set_task(model->config.task());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetModelMetadata(
    grpc::CallbackServerContext* context, const v1::ModelMetadataRequest* request,
    v1::ModelMetadataResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status st = Authorize(*context, access_, Access::kMetadata); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  auto found = repository_->Find(request->model_name(), request->model_version());
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  const ServedModel& model = **found;
  response->set_name(model.name);
  response->set_version(model.version);
  response->set_ready(model.ready());
  *response->mutable_config() = model.config;
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gatescope
