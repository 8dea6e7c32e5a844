// Scheduler running one model on N instance workers fed by one dynamic-batching queue.
#pragma once

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/batching/batch_queue.h"
#include "server/batching/scheduler.h"
#include "server/batching/scheduler_observer.h"
#include "server/common/clock.h"

namespace gatescope {

// Each worker owns one runner (a model instance). A free worker asks the BatchQueue for
// the next batch (waiting up to max_queue_delay for a fuller one), prepares the inputs,
// groups them by shape and runs each group in one runner call. Items past their deadline,
// cancelled, or failing to prepare finish alone; nothing thrown on a worker escapes.
class DynamicBatcher : public Scheduler {
 public:
  // `instances` (at least one), `clock` and `observer` (optional) are not owned and must
  // outlive the batcher. `config` is normalised here (INVALID_ARGUMENT if it is not
  // valid). Starts the workers.
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(
      std::vector<ModelRunner*> instances, DynamicBatchingConfig config, const Clock* clock,
      SchedulerObserver* observer = nullptr);
  ~DynamicBatcher() override;

  absl::Status Enqueue(WorkItem item) override;
  // Runs everything queued at once (max_queue_delay no longer applies), then joins.
  // Safe to call from several threads at once.
  void Stop() override;

  // Requests waiting (not yet taken by a worker). Thread-safe.
  int QueueDepth() const;
  const DynamicBatchingConfig& config() const { return queue_.config(); }

 private:
  using Entry = BatchQueue<WorkItem>::Entry;
  DynamicBatcher(DynamicBatchingConfig config, const Clock* clock, SchedulerObserver* observer);
  void WorkerLoop(ModelRunner* runner);
  // Takes expired entries or the next batch; false when stopping and drained.
  bool NextWork(std::vector<Entry>& expired, std::vector<Entry>& batch);
  // Requests of one runner call with their prepared inputs.
  using Group = std::vector<std::pair<WorkItem*, at::Tensor>>;
  void RunBatch(ModelRunner* runner, std::vector<Entry>& batch);
  // One runner call (a stacked prediction, or one explanation) and its replies.
  void RunGroup(ModelRunner* runner, Group& members, absl::Duration input_time,
                size_t prepared);

  const Clock* const clock_;
  SchedulerObserver* const observer_;  // may be null
  mutable absl::Mutex mu_;
  BatchQueue<WorkItem> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t arrivals_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex join_mu_;  // serialises Stop() callers around the joins
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace gatescope
