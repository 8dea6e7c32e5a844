// Manually advanced Clock for deterministic tests. Thread-safe.
#pragma once

#include "absl/synchronization/mutex.h"
#include "server/common/clock.h"

namespace gatescope::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope::testing
