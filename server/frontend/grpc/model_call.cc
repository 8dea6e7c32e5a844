#include "server/frontend/grpc/model_call.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/frontend/grpc/status_mapping.h"

namespace gatescope {

void ModelCall::Finish(const absl::Status& status) const {
  const double took = absl::ToDoubleSeconds(clock->Now() - start);
  model->metrics->RecordRequest(StatusCodeName(status.code()), took);
  reactor->Finish(ToGrpcStatus(status));
}

CallDone ModelCall::Done() const {
  return [call = *this](absl::Status status) { call.Finish(status); };
}

std::optional<ModelCall> BeginModelCall(grpc::ServerUnaryReactor* reactor,
                                        const ModelRepository& repository,
                                        const std::string& name, const std::string& version,
                                        bool shutting_down, const Clock* clock) {
  auto found = repository.Find(name, version);
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return std::nullopt;
  }
  ModelCall call{reactor, *std::move(found), clock, clock->Now()};
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

absl::Status Submit(const ModelCall& call, grpc::CallbackServerContext* context,
                    std::unique_ptr<InferenceJob> job, const Scheduling& scheduling,
                    std::function<bool()> abandoned) {
  WorkItem item;
  item.run_alone = job->explains();
  item.shape_key = job->shape_key();
  item.job = std::move(job);
  item.cancelled = [context, abandoned = std::move(abandoned)] {
    return context->IsCancelled() || (abandoned && abandoned());
  };
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    item.deadline = absl::FromChrono(deadline);
  }
  item.priority = scheduling.priority;
  item.timeout = scheduling.timeout;
  return call.model->scheduler->Enqueue(std::move(item));
}

}  // namespace gatescope
