// What every inference call does around a model, whatever carried it (gRPC unary, a gRPC
// stream, HTTP): look the model up, check it can take work, queue its job with the call's
// deadline, cancellation and scheduling, and finish exactly once while recording the
// outcome. No gRPC, no HTTP: a frontend supplies a CallContext and a FinishCall.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/api/request_scheduling.h"
#include "server/common/clock.h"
#include "server/repository/model_repository.h"
#include "server/tasks/inference_job.h"
#include "server/tasks/task.h"

namespace gatescope {

// Answers one call: called exactly once, on any thread, with the call's outcome. The
// frontend's response message must be complete when it runs with OK.
using FinishCall = std::function<void(absl::Status)>;

// What a transport tells the core about a call in progress.
struct CallContext {
  absl::Time deadline = absl::InfiniteFuture();  // the client's, when it sent one
  std::function<bool()> cancelled;  // true once the client has gone; may be empty; any thread
};

// One call on one ready model. Copyable; the model is kept alive by the copies, so requests
// in flight survive a reload.
struct ModelCall {
  FinishCall finish;
  std::shared_ptr<ServedModel> model;
  const Clock* clock;  // measures the call's latency; outlives the call
  absl::Time start;
  // The `kind` label of the call's latency and outcome; shared by the copies. gatescope.v1
  // knows it from the method; a KServe call starts as a prediction and becomes an
  // explanation when its jobs explain (its "explain" parameters), set before any is queued.
  std::shared_ptr<std::atomic<RequestKind>> kind;
  // The examples the call carries, for the version's statistics; shared by the copies, set
  // before any job is queued.
  std::shared_ptr<std::atomic<int>> examples = std::make_shared<std::atomic<int>>(1);

  // Records the outcome in the model's metrics and its version's statistics, and calls
  // `finish`. Call once.
  void Finish(const absl::Status& status) const;
  // Finish, as the callback a task's job calls.
  CallDone Done() const;
  const Task& task() const { return *model->task; }
};

// Finds the model and checks it can take work now. On failure `finish` has already been
// called and nullopt comes back; a failure after the model was found (shutting down, not
// ready) is recorded in its metrics under `kind`, as every later outcome is.
std::optional<ModelCall> BeginModelCall(FinishCall finish, RequestKind kind,
                                        const ModelRepository& repository,
                                        const std::string& name, const std::string& version,
                                        bool shutting_down, const Clock* clock);

// Queues `job` on the call's model, honouring the call's deadline and cancellation (or
// `abandoned`, when set, saying the call no longer needs the job) and `scheduling`. If the
// queue refuses it (RESOURCE_EXHAUSTED, UNAVAILABLE, INVALID_ARGUMENT for a priority or a
// small input that failed to decode on this thread), the job has already been refused with
// that status, which is returned. `context.cancelled` must stay callable until the job ends.
absl::Status Submit(const ModelCall& call, const CallContext& context,
                    std::unique_ptr<InferenceJob> job, const Scheduling& scheduling,
                    std::function<bool()> abandoned = nullptr);

// Queues the jobs of one call (its examples) together (Scheduler::EnqueueGroup), each as
// Submit would. On error every job is finished or queued, or will be refused once the
// call's preparations on the pool end: the refused ones with the status returned, and
// `abandoned` lets queued ones go.
absl::Status SubmitAll(const ModelCall& call, const CallContext& context,
                       std::vector<std::unique_ptr<InferenceJob>> jobs,
                       const Scheduling& scheduling, const std::function<bool()>& abandoned);

}  // namespace gatescope
