// The scheduling seam between frontends and a model's instances.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/batching/job.h"
#include "server/batching/queue_observer.h"
#include "server/config/batching_config.h"

namespace gatescope {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues `item` without blocking (beyond preparing a small input, see
  // PreparingScheduler). On error (RESOURCE_EXHAUSTED: queue full; UNAVAILABLE: stopping;
  // INVALID_ARGUMENT: bad priority or an input that failed its preparation) the job has
  // been refused with that status before this returns, so its call still finishes exactly
  // once.
  // Thread-safe.
  virtual absl::Status Enqueue(WorkItem item) = 0;
  // Queues the items of one call (the examples of a KServe request). An implementation may
  // promise that a worker sees none or all of them (DynamicBatcher does); this version
  // calls Enqueue for each in turn. On error the returned status is that of the first item
  // refused; that item and every later one have been refused with it, and each earlier one
  // is either queued or refused with it too (none is left unfinished). An implementation
  // that prepares items elsewhere may refuse them later instead, each exactly once
  // (PreparingScheduler refuses a whole call once its preparations on the pool end).
  // Thread-safe.
  virtual absl::Status EnqueueGroup(std::vector<WorkItem> items) {
    for (size_t i = 0; i < items.size(); ++i) {
      absl::Status st = Enqueue(std::move(items[i]));
      if (!st.ok()) {
        for (size_t j = i + 1; j < items.size(); ++j) items[j].job->Refuse(st);
        return st;
      }
    }
    return absl::OkStatus();
  }
  // Refuses new items, executes every queued one at once (batching delays no longer
  // apply), then joins the workers. Idempotent; blocks until drained; thread-safe.
  virtual void Stop() = 0;
  // Jobs waiting (not yet taken by a worker). Thread-safe.
  virtual int QueueDepth() const = 0;
};

// Makes a model's scheduler over its instances (not owned; they outlive it). `observer`
// may be null.
using SchedulerFactory = std::function<absl::StatusOr<std::unique_ptr<Scheduler>>(
    std::vector<Executor*> instances, const DynamicBatchingConfig& config,
    QueueObserver* observer)>;

}  // namespace gatescope
