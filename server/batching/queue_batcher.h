// Scheduler that runs a model on one worker thread, batching whatever is queued.
#pragma once

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/batching/scheduler.h"
#include "server/common/clock.h"

namespace gatescope {

struct QueueBatcherOptions {
  // Largest batch handed to the runner in one call.
  int max_batch_size = 16;
  // Enqueue fails with RESOURCE_EXHAUSTED beyond this many waiting items.
  int max_queue_size = 256;
};

// Each time the worker is free it takes up to max_batch_size waiting items (never waiting
// for more to arrive), prepares their inputs, stacks those that succeed and runs them in
// one runner call. Items prepared with an error or past their deadline finish alone.
class QueueBatcher : public Scheduler {
 public:
  // `runner` and `clock` are not owned and must outlive the batcher. Starts the worker.
  static absl::StatusOr<std::unique_ptr<QueueBatcher>> Create(ModelRunner* runner,
                                                              QueueBatcherOptions options,
                                                              const Clock* clock);
  ~QueueBatcher() override;

  absl::Status Enqueue(WorkItem item) override;
  void Stop() override;

  // Number of items waiting (not yet taken by the worker). Thread-safe.
  int QueueDepth() const;

 private:
  QueueBatcher(ModelRunner* runner, QueueBatcherOptions options, const Clock* clock);
  void WorkerLoop();
  void RunBatch(std::deque<WorkItem>& items);

  ModelRunner* const runner_;
  const QueueBatcherOptions options_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  std::deque<WorkItem> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace gatescope
