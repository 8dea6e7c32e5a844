// Time seam: production code reads time and waits through Clock, so tests drive it with
// simulated time (tests/mocks/fake_clock.h) instead of sleeping.
#pragma once

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gatescope {

class Clock {
 public:
  virtual ~Clock() = default;

  // Thread-safe, non-blocking.
  virtual absl::Time Now() const = 0;

  // Blocks until `condition` holds or this clock reaches `deadline`, and returns the
  // condition's value then. `mu` is held on entry and on return and released while
  // waiting. As with absl::Mutex::Await, the condition is re-evaluated whenever `mu` is
  // released, so whatever it reads must change only under `mu`. Thread-safe.
  virtual bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                                 absl::Time deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                         absl::Time deadline) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu.AwaitWithDeadline(condition, deadline);
  }
  // Process-wide instance; never destroyed.
  static const Clock* Get() {
    static const RealClock* clock = new RealClock();
    return clock;
  }
};

}  // namespace gatescope
