// Scheduler running one model on N instance workers fed by one dynamic-batching queue.
// Torch-free: it forms groups of opaque jobs; the instances gather, run and scatter.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/batching/batch_queue.h"
#include "server/batching/scheduler.h"
#include "server/common/clock.h"

namespace gatescope {

// Each worker drives one instance (Executor). A free worker asks the BatchQueue for the
// next group, waiting through the clock up to max_queue_delay for a fuller one; it refuses
// jobs past their deadline or cancelled, and hands the rest to its instance. Nothing
// thrown on a worker escapes. With config.idle_poll, a worker that finds the queue empty
// keeps its CPU and checks for arrivals (without the lock) for that long of real time
// before it sleeps on the clock; it sleeps at once when any batcher of the process runs a
// forward or receives a request meanwhile, since such a worker may need the CPU.
class DynamicBatcher : public Scheduler {
 public:
  // `instances` (at least one), `clock` and `observer` (optional) are not owned and must
  // outlive the batcher. `config` is normalised here (INVALID_ARGUMENT if it is not
  // valid). Starts the workers.
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(
      std::vector<Executor*> instances, DynamicBatchingConfig config, const Clock* clock,
      QueueObserver* observer = nullptr);
  // The factory of models served with this batcher on `clock` (not owned).
  static SchedulerFactory Factory(const Clock* clock);
  ~DynamicBatcher() override;

  absl::Status Enqueue(WorkItem item) override;
  // A worker sees none or all of the items that are queued; they count as one arrival for
  // early release (they came in one call).
  absl::Status EnqueueGroup(std::vector<WorkItem> items) override;
  void Stop() override;
  int QueueDepth() const override;
  const DynamicBatchingConfig& config() const { return queue_.config(); }

 private:
  using Entry = BatchQueue<WorkItem>::Entry;
  DynamicBatcher(DynamicBatchingConfig config, const Clock* clock, QueueObserver* observer);
  void WorkerLoop(Executor* instance);
  // Takes expired entries or the next group; false when stopping and drained.
  bool NextWork(std::vector<Entry>& expired, std::vector<Entry>& group);
  void ReportDepth() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `item` (an arrival, or a later item of the same call) at `now`; when its level
  // is full, first takes out into `expired` / `cancelled` the entries nobody waits for.
  // Does not refuse anything: the caller does, outside the lock.
  absl::Status PushLocked(WorkItem& item, absl::Time now, bool arrival,
                          std::vector<Entry>& expired, std::vector<Entry>& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the pushes of one Enqueue or EnqueueGroup: wakes the workers (and pollers) once
  // for the `n` items queued (none: no wake-up) and reports the queue's depth.
  void Queued(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns once signals_ differs from `seen`, another batcher's worker may want a CPU (an
  // arrival or a running forward anywhere in the process), or idle_poll_ has passed.
  void PollForSignal(uint64_t seen) const noexcept ABSL_LOCKS_EXCLUDED(mu_);

  const Clock* const clock_;
  QueueObserver* const observer_;  // may be null
  const absl::Duration idle_poll_;  // config.idle_poll (before queue_, which takes config)
  mutable absl::Mutex mu_;
  BatchQueue<WorkItem> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t arrivals_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Counts accepted arrivals and Stop calls. Written only under mu_, so a value read under
  // mu_ is current, and a poller that sees it unchanged has missed no arrival and no Stop.
  std::atomic<uint64_t> signals_{0};
  absl::Mutex join_mu_;  // serialises Stop() callers around the joins
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace gatescope
