// The request/forward scheduling split, on the real kernel: policies read back with
// sched_getscheduler. One process-wide switch, so one test drives it in order.
#include "server/common/thread_scheduling.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
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

// Process-wide like the policy, so the last test of the binary: its placement stays.
TEST(ThreadSchedulingTest, ForwardPassesRunOnTheirCpusAndEverythingElseOnTheRest) {
  const CpuList all = CurrentThreadCpus();
  ASSERT_FALSE(all.cpus.empty());
  const CpuList forward{{all.cpus.front()}};
  // One CPU: the lists overlap, which placement allows; the checks below still hold.
  const CpuList request = all.cpus.size() > 1 ? CpusNotIn(all, forward) : all;

  // A thread running before placement, as OpenBLAS's pool does: it does forward work.
  std::atomic<bool> placed{false};
  CpuList early_thread;
  std::thread early([&] {
    while (!placed.load()) std::this_thread::yield();
    early_thread = CurrentThreadCpus();
  });
  {
    const ForwardPassScheduling before_placement;  // nothing placed yet: no change
    EXPECT_EQ(CurrentThreadCpus(), all);
  }

  // A CPU the kernel refuses changes nothing.
  const absl::Status refused = PlaceForwardPasses(CpuList{{kMaxCpus - 1}}, request);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ(CurrentThreadCpus(), all);
  EXPECT_EQ(PlaceForwardPasses(CpuList{}, request).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(PlaceForwardPasses(forward, request).ok());
  placed = true;
  early.join();
  EXPECT_EQ(early_thread, forward);
  EXPECT_EQ(CurrentThreadCpus(), request);
  CpuList later;
  std::thread([&later] { later = CurrentThreadCpus(); }).join();
  EXPECT_EQ(later, request);  // every thread the server starts afterwards
  {
    const ForwardPassScheduling worker;
    EXPECT_EQ(CurrentThreadCpus(), forward);
    CpuList torch_thread;
    std::thread([&torch_thread] { torch_thread = CurrentThreadCpus(); }).join();
    EXPECT_EQ(torch_thread, forward);  // e.g. Torch's threads for this forward
    {
      const ForwardPassScheduling nested;
      EXPECT_EQ(CurrentThreadCpus(), forward);
    }
    EXPECT_EQ(CurrentThreadCpus(), forward);  // only the outermost scope moves back
  }
  EXPECT_EQ(CurrentThreadCpus(), request);
  EXPECT_EQ(PlaceForwardPasses(forward, request).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gatescope
