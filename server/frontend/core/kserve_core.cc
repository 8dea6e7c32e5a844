#include "server/frontend/core/kserve_core.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/api/infer_results.h"
#include "server/api/request_scheduling.h"
#include "server/repository/repository_names.h"

namespace gatescope {

namespace kv = ::inference;

KServeCore::KServeCore(ModelRepository* repository, bool explicit_control, const Clock* clock)
    : repository_(repository), model_control_(explicit_control), clock_(clock) {}

bool KServeCore::ServerReady() const {
  return !shutting_down() && repository_->ServesEveryModel();
}

bool KServeCore::ModelReady(const std::string& name, const std::string& version) const {
  auto model = repository_->Find(name, version);
  return model.ok() && (*model)->ready() && !shutting_down();
}

void KServeCore::ServerMetadata(kv::ServerMetadataResponse* response) const {
  response->set_name(kServerName);
  response->set_version(kServerVersion);
  for (const char* ext : {"model_repository", "model_configuration", "statistics",
                          "classification", "binary_tensor_data"}) {
    response->add_extensions(ext);
  }
}

void KServeCore::ModelInfer(const kv::ModelInferRequest* request,
                            kv::ModelInferResponse* response, const CallContext& context,
                            FinishCall finish) const {
  auto call = BeginModelCall(std::move(finish), RequestKind::kPredict, *repository_,
                             request->model_name(), request->model_version(), shutting_down(),
                             clock_);
  if (!call) return;
  absl::StatusOr<Scheduling> scheduling = SchedulingOf(*request);
  if (!scheduling.ok()) return call->Finish(scheduling.status());
  response->set_model_name(call->model->name);
  response->set_model_version(call->model->version);
  response->set_id(request->id());
  for (const auto& output : request->outputs()) {
    if (absl::StatusOr<int64_t> k = ClassCount(output); !k.ok()) return call->Finish(k.status());
  }
  OutputDeclaration declared;
  for (const DeclaredTensor& output : call->task().Signature().outputs) {
    declared.order.push_back(output.name);
  }
  declared.labels.assign(call->model->config.labels().begin(), call->model->config.labels().end());
  auto results =
      std::make_shared<InferResults>(request, response, call->Done(), std::move(declared));
  auto jobs = call->task().Infer(*request, results);
  const int max_batch = call->model->plan.batching.max_batch_size;
  if (jobs.ok() && static_cast<int64_t>(jobs->size()) > max_batch) {
    jobs = absl::InvalidArgumentError(absl::StrCat("ModelInfer: a batch of ", jobs->size(),
                                                   " examples exceeds the model's max_batch_size ",
                                                   max_batch));
  }
  if (!jobs.ok()) return call->Finish(jobs.status());
  call->examples->store(static_cast<int>(jobs->size()));
  if (std::any_of(jobs->begin(), jobs->end(), [](const auto& job) { return job->explains(); })) {
    call->kind->store(RequestKind::kExplain);
  }
  // Once an example has failed, the call's answer is that error: queued examples are
  // refused (as cancelled) rather than run. The examples reach the queue together once all
  // are prepared, here or on the preparation pool (Scheduler::EnqueueGroup): no worker
  // starts with part of them.
  auto abandoned = [results] { return results->failed(); };
  SubmitAll(*call, context, *std::move(jobs), *scheduling, abandoned)
      .IgnoreError();  // a refused job has been finished with its status
}

void KServeCore::Control(std::function<absl::Status()> work, FinishCall finish) {
  if (!model_control_) {
    return finish(absl::FailedPreconditionError(
        "explicit model control is off (start the server with --model_control=explicit; "
        "with polling the repository directory decides)"));
  }
  // The queue calls the work exactly once when it accepts it; `finish` is shared so that
  // a refusal can still answer.
  auto shared_finish = std::make_shared<FinishCall>(std::move(finish));
  const bool queued = control_.Submit([shared_finish, work = std::move(work)](bool run) {
    absl::Status st = absl::UnavailableError("server is shutting down");
    if (run) {
      try {
        st = work();
      } catch (const std::exception& e) {
        st = absl::InternalError(e.what());
      }
    }
    (*shared_finish)(st);
  });
  if (!queued) {
    (*shared_finish)(absl::ResourceExhaustedError(absl::StrCat(
        "too many model control calls waiting (", kMaxWaitingControlCalls, "); retry later")));
  }
}

void KServeCore::RepositoryModelLoad(const kv::RepositoryModelLoadRequest& request,
                                     FinishCall finish) {
  for (const auto& [key, value] : request.parameters()) {
    (void)value;
    if (key == "config" || absl::StartsWith(key, "file:")) {
      return finish(absl::InvalidArgumentError(absl::StrCat(
          "load parameter '", key,
          "' is not supported: gatescope loads a model's archive and config.pbtxt from the "
          "repository directory; change them there and load again")));
    }
    return finish(absl::InvalidArgumentError(
        absl::StrCat("unknown load parameter '", key, "'")));
  }
  Control([this, name = request.model_name()] { return repository_->LoadModel(name); },
          std::move(finish));
}

void KServeCore::RepositoryModelUnload(const kv::RepositoryModelUnloadRequest& request,
                                       FinishCall finish) {
  for (const auto& [key, value] : request.parameters()) {
    // Triton's unload_dependents: gatescope models have no dependents, so either value
    // unloads exactly the named model.
    if (key == "unload_dependents" &&
        value.parameter_choice_case() == kv::ModelRepositoryParameter::kBoolParam) {
      continue;
    }
    return finish(absl::InvalidArgumentError(
        absl::StrCat("unknown unload parameter '", key, "'")));
  }
  Control([this, name = request.model_name()] { return repository_->UnloadModel(name); },
          std::move(finish));
}

}  // namespace gatescope
