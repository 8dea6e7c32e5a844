#include "server/frontend/core/v1_core.h"

#include "server/api/request_scheduling.h"

namespace gatescope {

template <typename Request, typename Response, typename MakeJob>
void V1Core::Serve(RequestKind kind, const Request& request, Response* response,
                   const absl::StatusOr<Scheduling>& scheduling, const CallContext& context,
                   FinishCall finish, MakeJob make_job) const {
  auto call = BeginModelCall(std::move(finish), kind, *repository_, request.model_name(),
                             request.model_version(), shutting_down_.load(), clock_);
  if (!call) return;
  if (!scheduling.ok()) return call->Finish(scheduling.status());
  response->set_model_name(call->model->name);
  response->set_model_version(call->model->version);
  absl::StatusOr<std::unique_ptr<InferenceJob>> job = make_job(call->task(), call->Done());
  if (!job.ok()) return call->Finish(job.status());
  Submit(*call, context, *std::move(job), *scheduling).IgnoreError();  // refused: finished
}

void V1Core::Predict(const v1::PredictRequest* request, v1::PredictResponse* response,
                     const CallContext& context, FinishCall finish) const {
  Serve(RequestKind::kPredict, *request, response, SchedulingOf(*request), context,
        std::move(finish),
        [&](const Task& task, CallDone done) {
          return task.Predict(*request, response, std::move(done));
        });
}

void V1Core::Explain(const v1::ExplainRequest* request, v1::ExplainResponse* response,
                     const CallContext& context, FinishCall finish) const {
  Serve(RequestKind::kExplain, *request, response, Scheduling(), context, std::move(finish),
        [&](const Task& task, CallDone done) {
          return task.Explain(*request, response, std::move(done));
        });
}

void V1Core::ListModels(v1::ListModelsResponse* response) const {
  for (const auto& model : repository_->List()) {
    auto* m = response->add_models();
    m->set_name(model->name);
    m->set_version(model->version);
    m->set_ready(model->ready());
    m->set_task(model->config.task());
  }
}

absl::Status V1Core::GetModelMetadata(const v1::ModelMetadataRequest& request,
                                      v1::ModelMetadataResponse* response) const {
  auto found = repository_->Find(request.model_name(), request.model_version());
  if (!found.ok()) return found.status();
  const ServedModel& model = **found;
  response->set_name(model.name);
  response->set_version(model.version);
  response->set_ready(model.ready());
  *response->mutable_config() = model.config;
  // The largest batch the server forms (config.pbtxt's, else the smaller of the archive's
  // and --max_batch_size), as KServe's ModelConfig reports it.
  response->mutable_config()->set_max_batch_size(model.plan.batching.max_batch_size);
  return absl::OkStatus();
}

}  // namespace gatescope
