// Simulated time: Now() moves only when a test calls Advance, and Advance wakes every
// AwaitWithDeadline whose deadline it reaches, so delays and timeouts are tested exactly
// and instantly. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/common/clock.h"

namespace gatescope::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&time_mu_);
    return now_;
  }

  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                         absl::Time deadline) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (condition.Eval()) return true;
    waits_.fetch_add(1);
    auto waiter = std::make_shared<Waiter>();
    waiter->mu = &mu;
    waiter->deadline = deadline;
    // Lock order: time_mu_ may be taken under a caller's `mu`; waiters_mu_ is taken with
    // no caller mutex held, and Advance takes callers' mutexes under waiters_mu_.
    mu.Unlock();
    {
      absl::MutexLock lock(&waiters_mu_);
      if (Now() >= deadline) {
        waiter->fired = true;
      } else {
        waiters_.push_back(waiter);
      }
    }
    mu.Lock();
    auto woken = [&condition, &waiter] { return waiter->fired.load() || condition.Eval(); };
    mu.Await(absl::Condition(&woken));
    waiter->done = true;  // no longer waiting, though still listed until it leaves below
    mu.Unlock();
    {
      absl::MutexLock lock(&waiters_mu_);
      waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), waiter), waiters_.end());
    }
    mu.Lock();
    return condition.Eval();
  }

  // Moves time forward and wakes the waits whose deadline it reaches (returns once they
  // have been told; they run on their own threads).
  void Advance(absl::Duration d) {
    absl::Time now;
    {
      absl::MutexLock lock(&time_mu_);
      now_ += d;
      now = now_;
    }
    // Held while waking, so no waiter can leave (and free its mutex) meanwhile.
    absl::MutexLock lock(&waiters_mu_);
    for (const auto& w : waiters_) {
      if (w->fired.load() || w->deadline > now) continue;
      w->fired = true;
      w->mu->Lock();  // releasing the waiter's mutex makes it re-evaluate its condition
      w->mu->Unlock();
    }
  }

  // How many times a thread has begun to wait on this clock (its condition false), with
  // or without a deadline.
  int waits() const { return waits_.load(); }

  // Blocks until at least `n` threads wait on this clock for a (finite) deadline it has not
  // reached: a test advances time only once the code under test waits for time. Waits
  // with no deadline (only for their condition) do not count.
  void AwaitWaiters(int n) const {
    absl::MutexLock lock(&waiters_mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(waiters_mu_) {
      int pending = 0;
      for (const auto& w : waiters_) {
        pending += !w->fired.load() && !w->done.load() && w->deadline != absl::InfiniteFuture();
      }
      return pending >= n;
    };
    waiters_mu_.Await(absl::Condition(&enough));
  }

 private:
  struct Waiter {
    absl::Mutex* mu = nullptr;
    absl::Time deadline;
    std::atomic<bool> fired{false};  // the clock reached its deadline
    std::atomic<bool> done{false};   // it has stopped waiting
  };

  mutable std::atomic<int> waits_{0};
  mutable absl::Mutex time_mu_;
  absl::Time now_ ABSL_GUARDED_BY(time_mu_);
  mutable absl::Mutex waiters_mu_;
  mutable std::vector<std::shared_ptr<Waiter>> waiters_ ABSL_GUARDED_BY(waiters_mu_);
};

}  // namespace gatescope::testing
