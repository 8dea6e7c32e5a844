// Time seam: production code reads time through Clock so tests can inject a fake.
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gatescope {

class Clock {
 public:
  virtual ~Clock() = default;
  // Thread-safe, non-blocking.
  virtual absl::Time Now() const = 0;
};

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  // Process-wide instance; never destroyed.
  static const Clock* Get() {
    static const RealClock* clock = new RealClock();
    return clock;
  }
};

}  // namespace gatescope
