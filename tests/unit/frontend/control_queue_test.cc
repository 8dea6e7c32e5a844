#include "server/frontend/core/control_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace gatescope {
namespace {

// How each call ended: ran, or answered without running. Thread-safe.
struct Ends {
  absl::Mutex mu;
  std::vector<int> ran ABSL_GUARDED_BY(mu);
  std::vector<int> refused ABSL_GUARDED_BY(mu);
  ControlQueue::Work Call(int id) {
    return [this, id](bool run) {
      absl::MutexLock lock(&mu);
      (run ? ran : refused).push_back(id);
    };
  }
};

TEST(ControlQueueTest, RunsInOrderOneAtATimeAndBoundsTheWaiting) {
  Ends ends;
  absl::Notification started, release;
  {
    ControlQueue queue(/*max_waiting=*/2);
    ASSERT_TRUE(queue.Submit([&](bool run) {
      ASSERT_TRUE(run);
      started.Notify();
      release.WaitForNotification();  // a slow load holds the control thread
    }));
    started.WaitForNotification();
    EXPECT_TRUE(queue.Submit(ends.Call(1)));
    EXPECT_TRUE(queue.Submit(ends.Call(2)));
    EXPECT_FALSE(queue.Submit(ends.Call(3)));  // two already wait: refused, not called
    release.Notify();
    // Wait for both to have run before the queue stops.
    absl::MutexLock lock(&ends.mu);
    auto both = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ends.mu) { return ends.ran.size() == 2; };
    ends.mu.Await(absl::Condition(&both));
  }
  absl::MutexLock lock(&ends.mu);
  EXPECT_EQ(ends.ran, (std::vector<int>{1, 2}));
  EXPECT_TRUE(ends.refused.empty());
}

TEST(ControlQueueTest, StoppingAnswersTheWaitingCallsWithoutRunningThem) {
  Ends ends;
  absl::Notification started, release;
  auto queue = std::make_unique<ControlQueue>(/*max_waiting=*/4);
  ASSERT_TRUE(queue->Submit([&](bool) {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(queue->Submit(ends.Call(i)));
  absl::Notification stopped;
  std::thread stopper([&] {
    queue.reset();  // answers the three, then waits for the running call
    stopped.Notify();
  });
  {
    absl::MutexLock lock(&ends.mu);
    auto three = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ends.mu) { return ends.refused.size() == 3; };
    ends.mu.Await(absl::Condition(&three));
  }
  EXPECT_FALSE(stopped.HasBeenNotified());  // still waiting for the running call
  release.Notify();
  stopper.join();
  absl::MutexLock lock(&ends.mu);
  EXPECT_EQ(ends.refused, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ends.ran.empty());
}

}  // namespace
}  // namespace gatescope
