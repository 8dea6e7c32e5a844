// What a scheduler reports about its queue, for metrics. Implementations must be
// thread-safe and non-blocking: calls come from worker threads and Enqueue callers.
#pragma once

#include "absl/time/time.h"

namespace gatescope {

class QueueObserver {
 public:
  virtual ~QueueObserver() = default;
  // Jobs waiting, after every change.
  virtual void QueueDepth(int depth) = 0;
  // One job left the queue for a group after waiting `waited`.
  virtual void Dequeued(absl::Duration waited) = 0;
};

}  // namespace gatescope
