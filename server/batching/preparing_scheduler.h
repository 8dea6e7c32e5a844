// A model's scheduler in front of its dynamic batcher: jobs with CPU-heavy input work
// (Job::prepares_ahead, e.g. an encoded image) are prepared on the server-wide
// PreparationPool and only then queued on the batcher, so the model's instance workers
// never decode and a slow image holds up no other request of the model. Jobs whose work is
// short (Job::prepares_on_caller, a small image) are prepared on the enqueuing thread, and
// jobs without such work go to the batcher directly: neither takes an extra thread hop,
// unless it belongs to a call (EnqueueGroup) that also has jobs for the pool, which then
// goes to the batcher whole from the pool thread that ends the last preparation.
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
  // The jobs of one call, queued on `next` together (none before every one is prepared, so
  // a worker takes none or all of them, as `next` promises): jobs prepared on the caller
  // are prepared first, on this thread; jobs for the pool then go to the pool, one task
  // each (they prepare in parallel), and the last to finish hands the whole group on.
  // Fails as one: a preparation on the caller that fails refuses every job of the group
  // with its error, which is returned, and submits nothing to the pool; a pool job that
  // expires, is cancelled or fails (as in Enqueue) refuses every job of the group with
  // that status once the group's other preparations have ended (those not yet started are
  // skipped). RESOURCE_EXHAUSTED (pool full) or UNAVAILABLE (stopping) is returned when
  // the group cannot be submitted whole (it takes one of the pool's waiting places per
  // job for the pool); every job of the group is then refused with that status, at once
  // when none is on the pool, else when the last of those ends.
  absl::Status EnqueueGroup(std::vector<WorkItem> items) override;
  // Refuses new jobs, waits for this model's jobs in preparation to be queued, then stops
  // `next` (which drains them).
  void Stop() override;
  // Jobs in preparation plus those waiting in `next`.
  int QueueDepth() const override;

 private:
  class Group;
  void Prepare(WorkItem item);  // on a pool thread
  // The checks and the preparation of a job on a pool thread: DEADLINE_EXCEEDED or
  // CANCELLED if it expired or was cancelled while waiting, else PrepareAhead's status.
  absl::Status PrepareOnPool(WorkItem& item) const;
  // Ends a group whose preparations have all ended: queues it on `next`, or refuses every
  // job with `failure`. Then its jobs leave preparing_.
  void HandOn(std::vector<WorkItem> items, const absl::Status& failure);
  void Prepared(int jobs = 1);

  PreparationPool* const pool_;
  const Clock* const clock_;
  const std::unique_ptr<Scheduler> next_;
  mutable absl::Mutex mu_;
  int preparing_ ABSL_GUARDED_BY(mu_) = 0;  // jobs (a group's all) not yet handed to next_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gatescope
