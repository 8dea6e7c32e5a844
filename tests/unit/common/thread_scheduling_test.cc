// The request/forward scheduling split, on the real kernel: policies read back with
// sched_getscheduler. One process-wide switch, so one test drives it in order.
#include "server/common/thread_scheduling.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>

namespace gatescope {
namespace {

int PolicyOfNewThread() {
  int policy = -1;
  std::thread([&policy] { policy = sched_getscheduler(0); }).join();
  return policy;
}

TEST(ThreadSchedulingTest, ForwardPassesRunUnderTheStartPolicyAndEverythingElseBatch) {
  if (sched_getscheduler(0) != SCHED_OTHER) GTEST_SKIP() << "the test runs under another policy";
  {
    const ForwardPassScheduling before_the_switch;  // nothing to undo yet: no change
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  }
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);

  ASSERT_TRUE(SetRequestThreadsToBatchScheduling().ok());
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  EXPECT_EQ(PolicyOfNewThread(), SCHED_BATCH);  // inherited by every later thread
  {
    const ForwardPassScheduling forward;
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    EXPECT_EQ(PolicyOfNewThread(), SCHED_OTHER);  // e.g. Torch's threads for this forward
    {
      const ForwardPassScheduling nested;
      EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    }
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);  // only the outermost scope switches back
  }
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  int in_other_thread = -1;
  std::thread([&in_other_thread] {
    const ForwardPassScheduling forward;  // a batcher worker started after the switch
    in_other_thread = sched_getscheduler(0);
  }).join();
  EXPECT_EQ(in_other_thread, SCHED_OTHER);

  // The process now runs SCHED_BATCH: a second switch refuses to touch another policy.
  const absl::Status again = SetRequestThreadsToBatchScheduling();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("scheduling policy 3"), std::string::npos) << again;
}

TEST(ThreadSchedulingTest, NamesTheCallingThreadKeepingFifteenCharacters) {
  std::string name;
  std::thread([&name] {
    NameCurrentThread("gs-forward-and-more");
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    name = buf;
  }).join();
  EXPECT_EQ(name, "gs-forward-and-");
}

}  // namespace
}  // namespace gatescope
