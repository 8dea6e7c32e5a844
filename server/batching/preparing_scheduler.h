// A model's scheduler in front of its dynamic batcher: jobs with CPU-heavy input work
// (Job::prepares_ahead, e.g. an encoded image) are prepared on the server-wide
// PreparationPool and only then queued on the batcher, so the model's instance workers
// never decode and a slow image holds up no other request of the model. Jobs whose work is
// short (Job::prepares_on_caller, a small image) are prepared on the enqueuing thread, and
// jobs without such work go to the batcher directly: neither takes an extra thread hop.
// Torch-free.
#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/batching/preparation_pool.h"
#include "server/batching/scheduler.h"
#include "server/common/clock.h"

namespace gatescope {

class PreparingScheduler : public Scheduler {
 public:
  // `pool` and `clock` are not owned and must outlive the scheduler.
  PreparingScheduler(PreparationPool* pool, const Clock* clock, std::unique_ptr<Scheduler> next);
  // Every model made by `next` behind a PreparingScheduler on `pool`.
  static SchedulerFactory Wrap(PreparationPool* pool, const Clock* clock, SchedulerFactory next);
  ~PreparingScheduler() override;  // Stop()

  // Jobs that prepare ahead: RESOURCE_EXHAUSTED when the pool's queue is full, UNAVAILABLE
  // when stopping (refused at once); otherwise OK, and later the job is refused if it
  // expired or was cancelled while waiting (DEADLINE_EXCEEDED, CANCELLED) or its
  // preparation failed, or else queued on `next` (which may still refuse it). Jobs prepared
  // on the caller: their preparation's error is returned (and the job refused with it).
  absl::Status Enqueue(WorkItem item) override;
  // When every job is prepared on the caller or needs no preparation: prepares them all,
  // then queues them on `next` together. If a preparation fails, every job of the group is
  // refused with its error (none was queued) and it is returned. A group with any job for
  // the pool is queued job by job (Scheduler::EnqueueGroup): those jobs arrive as they are
  // prepared.
  absl::Status EnqueueGroup(std::vector<WorkItem> items) override;
  // Refuses new jobs, waits for this model's jobs in preparation to be queued, then stops
  // `next` (which drains them).
  void Stop() override;
  // Jobs in preparation plus those waiting in `next`.
  int QueueDepth() const override;

 private:
  void Prepare(WorkItem item);  // on a pool thread
  void Prepared();

  PreparationPool* const pool_;
  const Clock* const clock_;
  const std::unique_ptr<Scheduler> next_;
  mutable absl::Mutex mu_;
  int preparing_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gatescope
