// Dynamic-batching settings with Triton's meanings: max_batch_size, preferred_batch_size,
// max_queue_delay_microseconds, priority_levels / default_priority_level and the queue
// policy (max_queue_size, default_timeout_microseconds, allow_timeout_override,
// timeout_action REJECT | DELAY).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gatescope {

struct QueuePolicy {
  enum class TimeoutAction { kReject, kDelay };
  TimeoutAction timeout_action = TimeoutAction::kReject;
  // Time a request may wait in the queue; InfiniteDuration: no limit.
  absl::Duration default_timeout = absl::InfiniteDuration();
  // Whether a request may set its own (shorter or longer) queue timeout.
  bool allow_timeout_override = false;
  // Waiting requests per priority level beyond which new ones are rejected; 0: unlimited.
  int max_queue_size = 0;
};

inline constexpr int kMaxPriorityLevels = 256;
inline constexpr absl::Duration kMaxIdlePoll = absl::Seconds(1);

struct DynamicBatchingConfig {
  int max_batch_size = 1;
  // Batch sizes to prefer, ascending; empty: as large as possible.
  std::vector<int> preferred_batch_sizes;
  // How long the oldest request may wait for a fuller batch.
  absl::Duration max_queue_delay = absl::ZeroDuration();
  // A batch that is not full runs before max_queue_delay ends as soon as the time it has
  // left to wait is shorter than the mean gap between recent arrivals (each gap counted up
  // to twice the delay; explanations, which join no batch, not counted). The rule treats
  // arrivals as memoryless: the next one is expected a mean gap from now, whenever the
  // last one came. Sparse traffic (a lone caller, concurrency 1) then runs without the
  // delay; dense traffic waits the delay less one mean gap. Until two arrivals have given a
  // gap, the whole delay is waited. Triton's delay is also a maximum ("up to"), so
  // configurations keep their meaning; the server turns this on by default
  // (--early_batch_release). One statistic per model queue, over every shape and priority.
  bool release_when_arrivals_are_sparse = false;
  // How long a worker that finds the queue empty keeps its CPU checking for an arrival
  // before it sleeps; it sleeps at once when another model's work arrives or runs. Zero:
  // it sleeps at once. Meant for forward passes on CPUs of their own (--forward_cpus): an
  // arrival within the window starts its forward without waking a sleeping thread on an
  // idle CPU; the price is that CPU kept busy for up to this long after each idle start.
  absl::Duration idle_poll = absl::ZeroDuration();  // at most kMaxIdlePoll
  // Levels 1..priority_levels, 1 served first; 0 means a single level.
  int priority_levels = 0;
  int default_priority_level = 0;
  QueuePolicy queue_policy;
};

// Checks ranges and orders preferred sizes. INVALID_ARGUMENT names the field.
absl::Status NormaliseBatchingConfig(DynamicBatchingConfig& config);

// Waiting requests the queue holds before refusing, summed over its priority levels;
// 0 when the levels are unbounded.
int QueueCapacity(const DynamicBatchingConfig& config);

}  // namespace gatescope
