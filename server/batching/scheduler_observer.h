// What a scheduler reports about its work, for metrics. Implementations must be
// thread-safe and non-blocking: calls come from worker threads and Enqueue callers.
#pragma once

#include "absl/time/time.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  // Requests waiting, after every change.
  virtual void QueueDepth(int depth) = 0;
  // One request left the queue for a batch after waiting `waited`.
  virtual void Dequeued(absl::Duration waited) = 0;
  // One successful runner call: preparing its `batch_size` inputs, running it, slicing its
  // outputs per request. Called before any of those requests is answered.
  virtual void Executed(int batch_size, absl::Duration input, absl::Duration infer,
                        absl::Duration output) = 0;
  // The outputs [B, ...] of one successful prediction call, e.g. for statistics of the
  // served inputs. Must not keep references to the tensors' storage beyond the call.
  virtual void Outputs(const NamedTensors& outputs) { (void)outputs; }
};

}  // namespace gatescope
