#include "server/frontend/core/model_call.h"

#include "absl/strings/str_cat.h"
#include "server/frontend/core/status_names.h"

namespace gatescope {

void ModelCall::Finish(const absl::Status& status) const {
  const absl::Time now = clock->Now();
  model->metrics->RecordRequest(kind->load(), StatusCodeName(status.code()),
                                absl::ToDoubleSeconds(now - start));
  if (model->observer) {
    model->observer->statistics().Finished(status.ok(), examples->load(), now - start, now);
  }
  finish(status);
}

CallDone ModelCall::Done() const {
  return [call = *this](absl::Status status) { call.Finish(status); };
}

std::optional<ModelCall> BeginModelCall(FinishCall finish, RequestKind kind,
                                        const ModelRepository& repository,
                                        const std::string& name, const std::string& version,
                                        bool shutting_down, const Clock* clock) {
  auto found = repository.Find(name, version);
  if (!found.ok()) {
    finish(found.status());
    return std::nullopt;
  }
  ModelCall call{std::move(finish), *std::move(found), clock, clock->Now(),
                 std::make_shared<std::atomic<RequestKind>>(kind)};
  if (shutting_down) {
    call.Finish(absl::UnavailableError("server is shutting down"));
    return std::nullopt;
  }
  if (!call.model->ready()) {
    call.Finish(absl::UnavailableError(absl::StrCat("model '", call.model->name,
                                                    "' failed to load: ",
                                                    call.model->load_status.message())));
    return std::nullopt;
  }
  return call;
}

namespace {

WorkItem ItemOf(const CallContext& context, std::unique_ptr<InferenceJob> job,
                const Scheduling& scheduling, std::function<bool()> abandoned) {
  WorkItem item;
  item.run_alone = job->explains();
  item.shape_key = job->shape_key();
  item.job = std::move(job);
  item.cancelled = [cancelled = context.cancelled, abandoned = std::move(abandoned)] {
    return (cancelled && cancelled()) || (abandoned && abandoned());
  };
  if (context.deadline != absl::InfiniteFuture()) item.deadline = context.deadline;
  item.priority = scheduling.priority;
  item.timeout = scheduling.timeout;
  return item;
}

}  // namespace

absl::Status Submit(const ModelCall& call, const CallContext& context,
                    std::unique_ptr<InferenceJob> job, const Scheduling& scheduling,
                    std::function<bool()> abandoned) {
  return call.model->scheduler->Enqueue(
      ItemOf(context, std::move(job), scheduling, std::move(abandoned)));
}

absl::Status SubmitAll(const ModelCall& call, const CallContext& context,
                       std::vector<std::unique_ptr<InferenceJob>> jobs,
                       const Scheduling& scheduling, const std::function<bool()>& abandoned) {
  std::vector<WorkItem> items;
  items.reserve(jobs.size());
  for (auto& job : jobs) items.push_back(ItemOf(context, std::move(job), scheduling, abandoned));
  return call.model->scheduler->EnqueueGroup(std::move(items));
}

}  // namespace gatescope
