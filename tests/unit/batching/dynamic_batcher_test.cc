// The batcher alone: Torch-free jobs, a fake executor and simulated time (no sleeps).
#include "server/batching/dynamic_batcher.h"

#include <gtest/gtest.h>

#include <sys/prctl.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_executor.h"

namespace gatescope {
namespace {

using testing::FakeClock;
using testing::FakeExecutor;
using testing::Outcomes;
using testing::RecordingJob;

std::unique_ptr<DynamicBatcher> Make(std::vector<Executor*> instances, const Clock* clock,
                                     int max_batch, int max_queue, int delay_us = 0) {
  DynamicBatchingConfig config;
  config.max_batch_size = max_batch;
  config.queue_policy.max_queue_size = max_queue;
  config.max_queue_delay = absl::Microseconds(delay_us);
  return DynamicBatcher::Create(std::move(instances), config, clock).value();
}

WorkItem Item(int id, Outcomes* outcomes) {
  WorkItem item;
  item.job = std::make_unique<RecordingJob>(id, outcomes);
  return item;
}

// The examples of one call: jobs first, first + 1, ..., first + count - 1.
std::vector<WorkItem> Call(int first, int count, Outcomes* outcomes) {
  std::vector<WorkItem> items;
  for (int id = first; id < first + count; ++id) items.push_back(Item(id, outcomes));
  return items;
}

// A batcher whose only worker is held in its instance, running job 0 (of `outcomes`).
struct BusyWorker {
  BusyWorker(int max_batch, int max_queue, Outcomes* outcomes, QueueObserver* observer = nullptr) {
    DynamicBatchingConfig config;
    config.max_batch_size = max_batch;
    config.queue_policy.max_queue_size = max_queue;
    batcher = DynamicBatcher::Create({&executor}, config, &clock, observer).value();
    executor.Hold();
    EXPECT_TRUE(batcher->Enqueue(Item(0, outcomes)).ok());
    executor.AwaitEntered(1);
  }
  FakeExecutor executor;
  FakeClock clock;
  std::unique_ptr<DynamicBatcher> batcher;
};

class RecordingObserver : public QueueObserver {
 public:
  void QueueDepth(int depth) override {
    absl::MutexLock l(&mu_);
    depths.push_back(depth);
  }
  void Dequeued(absl::Duration waited) override {
    absl::MutexLock l(&mu_);
    waits.push_back(waited);
  }
  absl::Mutex mu_;
  std::vector<int> depths ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> waits ABSL_GUARDED_BY(mu_);
};

TEST(DynamicBatcherTest, GroupsQueuedJobsUpToTheMaximum) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 4, 100);
  Outcomes outcomes(7);
  executor.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);  // the worker holds job 0; the rest queue up
  for (int i = 1; i < 7; ++i) ASSERT_TRUE(batcher->Enqueue(Item(i, &outcomes)).ok());
  EXPECT_EQ(batcher->QueueDepth(), 6);
  executor.Release();
  outcomes.Await(7);
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0}, {1, 2, 3, 4}, {5, 6}}));
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(outcomes.executed(i)) << i;
}

TEST(DynamicBatcherTest, FullQueueRefusesTheJobAtOnce) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 1, 2);
  Outcomes outcomes(4);
  executor.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);
  ASSERT_TRUE(batcher->Enqueue(Item(1, &outcomes)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(2, &outcomes)).ok());
  EXPECT_EQ(batcher->Enqueue(Item(3, &outcomes)).code(), absl::StatusCode::kResourceExhausted);
  // Refused before Enqueue returned, so its call finished exactly once.
  EXPECT_EQ(outcomes.refused(3), absl::StatusCode::kResourceExhausted);
  executor.Release();
  outcomes.Await(4);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(outcomes.executed(i)) << i;
}

// A call's examples reach the queue in one step: a worker woken by the first can never find
// the queue holding only part of them (the depth goes 0 -> 4 -> 0, never 1, 2 or 3).
TEST(DynamicBatcherTest, AGroupIsQueuedAllAtOnce) {
  RecordingObserver observer;
  Outcomes outcomes(5);
  BusyWorker w(8, 0, &outcomes, &observer);
  {
    absl::MutexLock l(&observer.mu_);
    observer.depths.clear();
  }
  ASSERT_TRUE(w.batcher->EnqueueGroup(Call(1, 4, &outcomes)).ok());
  {
    absl::MutexLock l(&observer.mu_);
    EXPECT_EQ(observer.depths, (std::vector<int>{4}));
  }
  w.executor.Release();
  outcomes.Await(5);
  EXPECT_EQ(w.executor.groups(), (std::vector<std::vector<int>>{{0}, {1, 2, 3, 4}}));
}

// The queue fills part-way through a call: the examples queued stay queued and run, the one
// that did not fit and every later one are refused with RESOURCE_EXHAUSTED before the call
// returns.
TEST(DynamicBatcherTest, AGroupThatOverfillsTheQueueQueuesWhatFits) {
  Outcomes outcomes(5);
  BusyWorker w(8, 2, &outcomes);
  EXPECT_EQ(w.batcher->EnqueueGroup(Call(1, 4, &outcomes)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(outcomes.refused(3), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(outcomes.refused(4), absl::StatusCode::kResourceExhausted);
  w.executor.Release();
  outcomes.Await(5);
  EXPECT_EQ(w.executor.groups(), (std::vector<std::vector<int>>{{0}, {1, 2}}));
}

TEST(DynamicBatcherTest, AGroupAfterStopIsRefusedWhole) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 8, 100);
  batcher->Stop();
  Outcomes outcomes(3);
  EXPECT_EQ(batcher->EnqueueGroup(Call(0, 3, &outcomes)).code(), absl::StatusCode::kUnavailable);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outcomes.refused(i), absl::StatusCode::kUnavailable) << i;
}

TEST(DynamicBatcherTest, BadPriorityIsRefused) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 4, 10);
  Outcomes outcomes(1);
  WorkItem item = Item(0, &outcomes);
  item.priority = 2;  // the model has a single level
  EXPECT_EQ(batcher->Enqueue(std::move(item)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outcomes.refused(0), absl::StatusCode::kInvalidArgument);
}

TEST(DynamicBatcherTest, JobsPastTheirDeadlineAreRefusedUnrun) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 8, 100);
  Outcomes outcomes(3);
  executor.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);
  WorkItem late = Item(1, &outcomes);
  late.deadline = clock.Now() + absl::Seconds(1);
  WorkItem fine = Item(2, &outcomes);
  fine.deadline = clock.Now() + absl::Seconds(10);
  ASSERT_TRUE(batcher->Enqueue(std::move(late)).ok());
  ASSERT_TRUE(batcher->Enqueue(std::move(fine)).ok());
  clock.Advance(absl::Seconds(5));
  executor.Release();
  outcomes.Await(3);
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(outcomes.executed(2));
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0}, {2}}));
}

TEST(DynamicBatcherTest, CancelledJobsAreRefusedUnrun) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 8, 100);
  Outcomes outcomes(3);
  executor.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);
  WorkItem gone = Item(1, &outcomes);
  gone.cancelled = [] { return true; };
  ASSERT_TRUE(batcher->Enqueue(std::move(gone)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(2, &outcomes)).ok());
  executor.Release();
  outcomes.Await(3);
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kCancelled);
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0}, {2}}));
}

TEST(DynamicBatcherTest, DeadRequestsGiveUpTheirSlotsWhileTheWorkerIsBusy) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 8, 2);
  Outcomes outcomes(5);
  executor.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);  // the worker is busy and does not look at the queue
  WorkItem late = Item(1, &outcomes);
  late.deadline = clock.Now() + absl::Seconds(1);
  auto hung_up = std::make_shared<std::atomic<bool>>(false);
  WorkItem gone = Item(2, &outcomes);
  gone.cancelled = [hung_up] { return hung_up->load(); };
  ASSERT_TRUE(batcher->Enqueue(std::move(late)).ok());
  ASSERT_TRUE(batcher->Enqueue(std::move(gone)).ok());
  // Both still wanted: the queue is full.
  EXPECT_EQ(batcher->Enqueue(Item(3, &outcomes)).code(), absl::StatusCode::kResourceExhausted);
  // One passes its deadline, the other's caller hangs up: a new request takes a slot at
  // once, and both dead ones are finished then, before the worker is free.
  clock.Advance(absl::Seconds(5));
  hung_up->store(true);
  ASSERT_TRUE(batcher->Enqueue(Item(4, &outcomes)).ok());
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(outcomes.refused(2), absl::StatusCode::kCancelled);
  EXPECT_EQ(batcher->QueueDepth(), 1);
  executor.Release();
  outcomes.Await(5);
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0}, {4}}));
}

TEST(DynamicBatcherTest, RunAloneJobsAreGroupedWithNoOther) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 8, 100);
  Outcomes outcomes(6);
  executor.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);
  for (int i = 1; i < 6; ++i) {
    WorkItem item = Item(i, &outcomes);
    item.run_alone = i == 2 || i == 3;  // e.g. explanation passes
    ASSERT_TRUE(batcher->Enqueue(std::move(item)).ok());
  }
  executor.Release();
  outcomes.Await(6);
  EXPECT_EQ(executor.groups(),
            (std::vector<std::vector<int>>{{0}, {1, 4, 5}, {2}, {3}}));
}

TEST(DynamicBatcherTest, WaitsForAFullerGroupExactlyTheDelay) {
  FakeExecutor executor;
  FakeClock clock;
  RecordingObserver observer;
  DynamicBatchingConfig config;
  config.max_batch_size = 4;
  config.max_queue_delay = absl::Microseconds(100);
  auto batcher = DynamicBatcher::Create({&executor}, config, &clock, &observer).value();
  Outcomes outcomes(7);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(batcher->Enqueue(Item(i, &outcomes)).ok());
  clock.AwaitWaiters(1);  // the worker waits for a fourth job or the delay
  clock.Advance(absl::Microseconds(99));
  EXPECT_TRUE(executor.groups().empty());
  clock.Advance(absl::Microseconds(1));  // the delay has passed: three go
  outcomes.Await(3);
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0, 1, 2}}));
  // A full group goes at once, without waiting for the delay.
  for (int i = 3; i < 7; ++i) ASSERT_TRUE(batcher->Enqueue(Item(i, &outcomes)).ok());
  outcomes.Await(7);
  EXPECT_EQ(executor.groups().back(), (std::vector<int>{3, 4, 5, 6}));
  absl::MutexLock l(&observer.mu_);
  EXPECT_EQ(observer.waits.front(), absl::Microseconds(100));
  EXPECT_EQ(observer.waits.back(), absl::ZeroDuration());
  EXPECT_EQ(observer.depths.back(), 0);
}

TEST(DynamicBatcherTest, WithEarlyReleaseTheFirstRequestAfterQuietRunsAtOnce) {
  FakeExecutor executor;
  FakeClock clock;
  DynamicBatchingConfig config;
  config.max_batch_size = 4;
  config.max_queue_delay = absl::Milliseconds(20);
  config.release_when_arrivals_are_sparse = true;
  auto batcher = DynamicBatcher::Create({&executor}, config, &clock).value();
  // The model loaded, warmed up and waited a second for its first request: no time passes
  // while it runs, as no company was to be expected within its 20 ms delay.
  clock.Advance(absl::Seconds(1));
  Outcomes outcomes(1);
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  // (Waiting the delay, it would wait for a clock that no one advances.)
  ASSERT_TRUE(outcomes.AwaitFor(1, absl::Seconds(30)));
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0}}));
  clock.Advance(absl::Milliseconds(20));  // lets a waiting worker go, for the teardown
}

TEST(DynamicBatcherTest, QueueTimeoutRefusesAtTheDeadlineWithoutSleeping) {
  FakeExecutor executor;
  FakeClock clock;
  DynamicBatchingConfig config;
  config.max_batch_size = 4;
  config.max_queue_delay = absl::Seconds(10);  // would hold the job far longer
  config.queue_policy.default_timeout = absl::Milliseconds(5);
  auto batcher = DynamicBatcher::Create({&executor}, config, &clock).value();
  Outcomes outcomes(1);
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  clock.AwaitWaiters(1);
  clock.Advance(absl::Milliseconds(5));
  outcomes.Await(1);
  EXPECT_EQ(outcomes.refused(0), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(executor.groups().empty());
}

TEST(DynamicBatcherTest, StopRunsEverythingQueuedThenRefuses) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 2, 100, /*delay_us=*/1000000);
  Outcomes outcomes(6);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(batcher->Enqueue(Item(i, &outcomes)).ok());
  batcher->Stop();  // no time passes: the delay no longer applies
  EXPECT_EQ(outcomes.finished(), 5);
  EXPECT_EQ(executor.sizes(), (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(batcher->Enqueue(Item(5, &outcomes)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcomes.refused(5), absl::StatusCode::kUnavailable);
}

TEST(DynamicBatcherTest, StopFromSeveralThreadsAtOnceDrainsOnce) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 4, 100);
  Outcomes outcomes(3);
  executor.Hold();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(batcher->Enqueue(Item(i, &outcomes)).ok());
  std::thread a([&] { batcher->Stop(); });
  std::thread b([&] { batcher->Stop(); });
  executor.Release();
  a.join();
  b.join();
  // Both returned only after the drain: every job ran, exactly once.
  EXPECT_EQ(outcomes.finished(), 3);
  size_t ran = 0;
  for (const auto& g : executor.groups()) ran += g.size();
  EXPECT_EQ(ran, 3u);
}

TEST(DynamicBatcherTest, InstancesRunConcurrently) {
  FakeExecutor a, b;
  FakeClock clock;
  auto batcher = Make({&a, &b}, &clock, 1, 100);
  Outcomes outcomes(2);
  a.Hold();
  b.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(1, &outcomes)).ok());
  a.AwaitEntered(1);  // both instances hold one job at the same time
  b.AwaitEntered(1);
  a.Release();
  b.Release();
  outcomes.Await(2);
  EXPECT_EQ(a.sizes().size() + b.sizes().size(), 2u);
}

TEST(DynamicBatcherTest, AThrowingInstanceDoesNotStopItsWorker) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 1, 100);
  Outcomes outcomes(2);
  executor.ThrowNext();
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  executor.AwaitEntered(1);
  ASSERT_TRUE(batcher->Enqueue(Item(1, &outcomes)).ok());
  outcomes.Await(1);
  EXPECT_TRUE(outcomes.executed(1));
  EXPECT_EQ(executor.groups().size(), 2u);
}

// Records the timer slack of the thread that executes the group.
class SlackRecordingExecutor : public Executor {
 public:
  void Execute(std::vector<std::unique_ptr<Job>> group) override {
    slack_ns = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    for (auto& job : group) static_cast<RecordingJob&>(*job).Executed();
  }
  std::atomic<long> slack_ns{-1};
};

TEST(DynamicBatcherTest, WorkersWaitWithoutTimerSlack) {
  // The worker's timed wait is the queue delay; the kernel's default 50 us slack would
  // lengthen every delayed batch (docs/performance.md, "Timer slack").
  // The kernel's default, which a new thread inherits from the thread that creates it.
  ASSERT_EQ(prctl(PR_SET_TIMERSLACK, 50000UL, 0UL, 0UL, 0UL), 0);
  SlackRecordingExecutor executor;
  FakeClock clock;
  auto batcher = Make({&executor}, &clock, 4, 100);
  Outcomes outcomes(1);
  ASSERT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
  outcomes.Await(1);
  EXPECT_EQ(executor.slack_ns.load(), 1);
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 50000) << "only the worker's own slack";
}

std::unique_ptr<DynamicBatcher> MakePolling(Executor* executor, const Clock* clock,
                                            absl::Duration idle_poll) {
  DynamicBatchingConfig config;
  config.max_batch_size = 4;
  config.idle_poll = idle_poll;
  return DynamicBatcher::Create({executor}, config, clock).value();
}

TEST(DynamicBatcherTest, AnIdleWorkerPollsForArrivalsInsteadOfSleeping) {
  FakeExecutor executor;
  FakeClock clock;
  auto batcher = MakePolling(&executor, &clock, absl::Seconds(1));
  Outcomes outcomes(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(batcher->Enqueue(Item(i, &outcomes)).ok());
    outcomes.Await(i + 1);
  }
  // Each arrival came within a window: the worker never slept on the clock.
  EXPECT_EQ(clock.waits(), 0);
  EXPECT_EQ(executor.groups(), (std::vector<std::vector<int>>{{0}, {1}, {2}}));
}

// A polling batcher whose worker has just run job 0 of `jobs`: idle from here on.
struct IdleAfterOneJob {
  IdleAfterOneJob(absl::Duration idle_poll, int jobs) : outcomes(jobs) {
    batcher = MakePolling(&executor, &clock, idle_poll);
    EXPECT_TRUE(batcher->Enqueue(Item(0, &outcomes)).ok());
    outcomes.Await(1);
  }
  FakeExecutor executor;
  FakeClock clock;
  Outcomes outcomes;
  std::unique_ptr<DynamicBatcher> batcher;  // first to go: it uses the others
};

TEST(DynamicBatcherTest, AWorkerSleepsOnceItsPollWindowHasPassed) {
  IdleAfterOneJob idle(absl::Milliseconds(20), 2);
  while (idle.clock.waits() == 0) std::this_thread::yield();  // hangs if the poll never ends
  ASSERT_TRUE(idle.batcher->Enqueue(Item(1, &idle.outcomes)).ok());  // wakes the worker
  idle.outcomes.Await(2);
  EXPECT_TRUE(idle.outcomes.executed(1));
}

TEST(DynamicBatcherTest, StopEndsAPollAtOnce) {
  IdleAfterOneJob idle(absl::Seconds(1), 1);
  absl::SleepFor(absl::Milliseconds(50));  // the worker is inside its second-long window
  const absl::Time start = absl::Now();
  idle.batcher->Stop();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500)) << "Stop waited out the window";
  EXPECT_EQ(idle.clock.waits(), 0);
}

// Whether `clock` has a waiter within `limit` of real time: a second-long poll window
// that ended early.
bool SleepsWithin(const FakeClock& clock, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (clock.waits() == 0 && absl::Now() < give_up) std::this_thread::yield();
  return clock.waits() > 0;
}

// Another model's batcher in the same process, with one job to run.
struct OtherModel {
  FakeExecutor executor;
  FakeClock clock;
  Outcomes outcomes{1};
  std::unique_ptr<DynamicBatcher> batcher = Make({&executor}, &clock, 4, 100);
};

TEST(DynamicBatcherTest, AnotherModelsArrivalEndsAPoll) {
  IdleAfterOneJob idle(absl::Seconds(1), 1);
  absl::SleepFor(absl::Milliseconds(50));  // polling now
  ASSERT_EQ(idle.clock.waits(), 0);
  OtherModel other;
  ASSERT_TRUE(other.batcher->Enqueue(Item(0, &other.outcomes)).ok());
  // A poller that kept its CPU would hold off the other worker on a shared one.
  EXPECT_TRUE(SleepsWithin(idle.clock, absl::Milliseconds(500)));
  other.outcomes.Await(1);
}

TEST(DynamicBatcherTest, NoPollWhileAnotherModelsForwardRuns) {
  OtherModel other;
  other.executor.Hold();
  ASSERT_TRUE(other.batcher->Enqueue(Item(0, &other.outcomes)).ok());
  other.executor.AwaitEntered(1);  // a forward runs
  IdleAfterOneJob idle(absl::Seconds(1), 1);
  EXPECT_TRUE(SleepsWithin(idle.clock, absl::Milliseconds(500)));
  other.executor.Release();
  other.outcomes.Await(1);
}

TEST(DynamicBatcherTest, RejectsBadOptions) {
  FakeExecutor executor;
  FakeClock clock;
  DynamicBatchingConfig bad;
  bad.max_batch_size = 0;
  EXPECT_EQ(DynamicBatcher::Create({&executor}, bad, &clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  DynamicBatchingConfig long_poll;
  long_poll.idle_poll = absl::Seconds(2);
  EXPECT_EQ(DynamicBatcher::Create({&executor}, long_poll, &clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DynamicBatcher::Create({nullptr}, DynamicBatchingConfig(), &clock).ok());
  EXPECT_FALSE(DynamicBatcher::Create({}, DynamicBatchingConfig(), &clock).ok());
  EXPECT_FALSE(DynamicBatcher::Create({&executor}, DynamicBatchingConfig(), nullptr).ok());
}

}  // namespace
}  // namespace gatescope
