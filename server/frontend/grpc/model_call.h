// What every inference RPC does around a model: look it up, check it can take work, queue
// its job with the call's deadline, cancellation and scheduling, and finish exactly once
// while recording the outcome. Shared by the gatescope.v1 and KServe v2 services.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/api/request_scheduling.h"
#include "server/common/clock.h"
#include "server/repository/model_repository.h"
#include "server/tasks/inference_job.h"
#include "server/tasks/task.h"

namespace gatescope {

// One call on one ready model. Copyable; the reactor and model outlive every copy's use
// (the model is kept alive by the copies, so requests in flight survive a reload).
struct ModelCall {
  grpc::ServerUnaryReactor* reactor;
  std::shared_ptr<ServedModel> model;
  const Clock* clock;  // measures the call's latency; outlives the call
  absl::Time start;

  // Records the outcome in the model's metrics and finishes the reactor. Call once.
  void Finish(const absl::Status& status) const;
  // Finish, as the callback a task's job calls.
  CallDone Done() const;
  const Task& task() const { return *model->task; }
};

// Finds the model and checks it can take work now. On failure `reactor` (the call's one
// default reactor) is already finished and nullopt comes back.
std::optional<ModelCall> BeginModelCall(grpc::ServerUnaryReactor* reactor,
                                        const ModelRepository& repository,
                                        const std::string& name, const std::string& version,
                                        bool shutting_down, const Clock* clock);

// Queues `job` on the call's model, honouring the call's gRPC deadline and cancellation
// (or `abandoned`, when set, saying the call no longer needs the job) and `scheduling`. If
// the queue refuses it (RESOURCE_EXHAUSTED, UNAVAILABLE, INVALID_ARGUMENT for a priority or
// a small input that failed to decode on this thread), the job has already been refused
// with that status, which is returned. `context` must outlive
// the job (it does: the call ends in the job's done).
absl::Status Submit(const ModelCall& call, grpc::CallbackServerContext* context,
                    std::unique_ptr<InferenceJob> job, const Scheduling& scheduling,
                    std::function<bool()> abandoned = nullptr);

}  // namespace gatescope
