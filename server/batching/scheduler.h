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
