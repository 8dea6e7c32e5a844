// Preparation ahead of queuing: the pool and the scheduler in front of a real batcher, with
// Torch-free jobs whose preparation can be held open, a fake executor and simulated time.
#include "server/batching/preparing_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/batching/dynamic_batcher.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_executor.h"

namespace gatescope {
namespace {

using testing::FakeClock;
using testing::FakeExecutor;
using testing::Outcomes;
using testing::RecordingJob;

// A job with input work to do ahead of queuing; the work waits for `gate` when given,
// records its thread, and ends with `result`.
class PreparingJob : public RecordingJob {
 public:
  PreparingJob(int id, Outcomes* outcomes, absl::Notification* gate = nullptr,
               absl::Status result = absl::OkStatus())
      : RecordingJob(id, outcomes), gate_(gate), result_(std::move(result)) {}
  bool prepares_ahead() const override { return true; }
  absl::Status PrepareAhead() override {
    prepared_on = std::this_thread::get_id();
    if (preparations != nullptr) ++*preparations;
    if (gate_ != nullptr) gate_->WaitForNotification();
    return result_;
  }
  bool prepares_on_caller() const override { return on_caller; }
  std::thread::id prepared_on;  // read by the test while the job is alive
  bool on_caller = false;
  std::atomic<int>* preparations = nullptr;  // when set, counts PrepareAhead calls

 private:
  absl::Notification* const gate_;
  const absl::Status result_;
};

struct Fixture {
  explicit Fixture(int threads = 2, int max_waiting = 8, int max_batch = 1)
      : pool(threads, max_waiting) {
    DynamicBatchingConfig config;
    config.max_batch_size = max_batch;
    config.queue_policy.max_queue_size = 16;
    scheduler = std::make_unique<PreparingScheduler>(
        &pool, &clock,
        DynamicBatcher::Create({&executor}, config, &clock).value());
  }
  absl::Status Add(std::unique_ptr<Job> job, absl::Time deadline = absl::InfiniteFuture()) {
    WorkItem item;
    item.job = std::move(job);
    item.deadline = deadline;
    return scheduler->Enqueue(std::move(item));
  }
  // Job 0 (of `outcomes`) takes a pool thread and holds it until `gate` opens: returns once
  // it runs, so that it no longer counts among the pool's waiting tasks.
  void HoldAPoolThread(Outcomes* outcomes, absl::Notification* gate) {
    EXPECT_TRUE(Add(std::make_unique<PreparingJob>(0, outcomes, gate)).ok());
    while (pool.Waiting() != 0) std::this_thread::yield();
  }
  FakeClock clock;
  FakeExecutor executor;
  PreparationPool pool;
  std::unique_ptr<PreparingScheduler> scheduler;
};

// Whether the scheduler's depth reaches `depth` within a second (a job is finished just
// before its group leaves the count of jobs in preparation, so a test waits for it).
bool DepthFallsTo(const Scheduler& scheduler, int depth) {
  const absl::Time give_up = absl::Now() + absl::Seconds(1);
  while (scheduler.QueueDepth() != depth) {
    if (absl::Now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(PreparingScheduler, PreparesOnAPoolThreadThenRuns) {
  Fixture f;
  Outcomes outcomes(2);
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(0, &outcomes)).ok());
  ASSERT_TRUE(f.Add(std::make_unique<RecordingJob>(1, &outcomes)).ok());  // nothing ahead
  outcomes.Await(2);
  EXPECT_TRUE(outcomes.executed(0));
  EXPECT_TRUE(outcomes.executed(1));
}

TEST(PreparingScheduler, PreparationRunsOffTheCallerThread) {
  Fixture f;
  Outcomes outcomes(1);
  absl::Notification gate;
  auto job = std::make_unique<PreparingJob>(0, &outcomes, &gate);
  PreparingJob* raw = job.get();
  ASSERT_TRUE(f.Add(std::move(job)).ok());  // returns while the preparation is held
  EXPECT_EQ(outcomes.finished(), 0);
  EXPECT_EQ(f.scheduler->QueueDepth(), 1);
  f.executor.Hold();
  gate.Notify();
  f.executor.AwaitEntered(1);  // the job now sits in the executor, alive
  EXPECT_NE(raw->prepared_on, std::this_thread::get_id());
  EXPECT_NE(raw->prepared_on, std::thread::id());
  f.executor.Release();
  outcomes.Await(1);
  EXPECT_TRUE(outcomes.executed(0));
}

// Small inputs are prepared by the thread that enqueues them: no hop before the worker's.
TEST(PreparingScheduler, PreparesOnTheCallerWhenTheJobSaysItIsCheap) {
  Fixture f;
  Outcomes outcomes(2);
  auto job = std::make_unique<PreparingJob>(0, &outcomes);
  job->on_caller = true;
  PreparingJob* raw = job.get();
  f.executor.Hold();
  ASSERT_TRUE(f.Add(std::move(job)).ok());
  f.executor.AwaitEntered(1);  // the job now sits in the executor, alive
  EXPECT_EQ(raw->prepared_on, std::this_thread::get_id());
  EXPECT_EQ(f.pool.Waiting(), 0);
  f.executor.Release();

  // A failed preparation on the caller is returned at once and the job refused with it.
  auto bad = std::make_unique<PreparingJob>(1, &outcomes, nullptr,
                                            absl::InvalidArgumentError("not an image"));
  bad->on_caller = true;
  absl::Status st = f.Add(std::move(bad));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  outcomes.Await(2);
  EXPECT_TRUE(outcomes.executed(0));
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kInvalidArgument);
}

// A call's examples prepared on the caller are all prepared first and then queued in one
// step (so they run together); one failed preparation refuses the whole call, none queued.
TEST(PreparingScheduler, AGroupPreparedOnTheCallerIsQueuedTogether) {
  Fixture f(2, 8, /*max_batch=*/8);
  Outcomes outcomes(7);
  std::vector<WorkItem> call;
  for (int i = 0; i < 3; ++i) {
    auto job = std::make_unique<PreparingJob>(i, &outcomes);
    job->on_caller = true;
    WorkItem item;
    item.job = std::move(job);
    call.push_back(std::move(item));
  }
  WorkItem plain;
  plain.job = std::make_unique<RecordingJob>(3, &outcomes);  // nothing to prepare
  call.push_back(std::move(plain));
  ASSERT_TRUE(f.scheduler->EnqueueGroup(std::move(call)).ok());
  outcomes.Await(4);
  EXPECT_EQ(f.executor.groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));

  std::vector<WorkItem> bad_call;
  for (int i = 4; i < 7; ++i) {
    auto job = std::make_unique<PreparingJob>(
        i, &outcomes, nullptr,
        i == 5 ? absl::InvalidArgumentError("not an image") : absl::OkStatus());
    job->on_caller = true;
    WorkItem item;
    item.job = std::move(job);
    bad_call.push_back(std::move(item));
  }
  EXPECT_EQ(f.scheduler->EnqueueGroup(std::move(bad_call)).code(),
            absl::StatusCode::kInvalidArgument);
  for (int i = 4; i < 7; ++i) {
    EXPECT_EQ(outcomes.refused(i), absl::StatusCode::kInvalidArgument) << i;
  }
  EXPECT_EQ(f.executor.groups().size(), 1u);
}

// A call with examples for the pool: those prepare on pool threads, the others on the
// caller, and the call reaches the queue whole once the last preparation ends (one batch),
// not as each example is ready.
TEST(PreparingScheduler, AGroupWithPoolWorkIsQueuedWholeOnceEveryJobIsPrepared) {
  Fixture f(2, 8, /*max_batch=*/8);
  Outcomes outcomes(4);
  absl::Notification gate0, gate1;
  std::vector<WorkItem> call;
  auto first = std::make_unique<PreparingJob>(0, &outcomes, &gate0);
  auto second = std::make_unique<PreparingJob>(1, &outcomes, &gate1);
  auto small = std::make_unique<PreparingJob>(2, &outcomes);
  small->on_caller = true;
  PreparingJob* raw0 = first.get();
  PreparingJob* raw2 = small.get();
  call.emplace_back().job = std::move(first);
  call.emplace_back().job = std::move(second);
  call.emplace_back().job = std::move(small);
  call.emplace_back().job = std::make_unique<RecordingJob>(3, &outcomes);  // nothing to prepare
  ASSERT_TRUE(f.scheduler->EnqueueGroup(std::move(call)).ok());
  EXPECT_EQ(f.scheduler->QueueDepth(), 4);  // the whole call waits on its preparations
  gate1.Notify();
  EXPECT_FALSE(outcomes.AwaitFor(1, absl::Milliseconds(50)));  // job 0 still prepares
  f.executor.Hold();
  gate0.Notify();
  f.executor.AwaitEntered(1);  // the call's jobs now sit in the executor, alive
  EXPECT_NE(raw0->prepared_on, std::this_thread::get_id());
  EXPECT_NE(raw0->prepared_on, std::thread::id());
  EXPECT_EQ(raw2->prepared_on, std::this_thread::get_id());
  f.executor.Release();
  outcomes.Await(4);
  EXPECT_EQ(f.executor.groups(), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
  EXPECT_TRUE(DepthFallsTo(*f.scheduler, 0));  // the group has left preparation
}

// The examples for the pool prepare in parallel, one pool task each.
TEST(PreparingScheduler, AGroupsPoolJobsPrepareInParallel) {
  Fixture f(2, 8, /*max_batch=*/8);
  Outcomes outcomes(2);
  absl::Notification gate;
  std::vector<WorkItem> call;
  std::vector<PreparingJob*> raw;
  for (int i = 0; i < 2; ++i) {
    auto job = std::make_unique<PreparingJob>(i, &outcomes, &gate);
    raw.push_back(job.get());
    call.emplace_back().job = std::move(job);
  }
  ASSERT_TRUE(f.scheduler->EnqueueGroup(std::move(call)).ok());
  // Both preparations are held at the gate at once, so they took both pool threads.
  while (f.pool.Waiting() != 0) std::this_thread::yield();
  f.executor.Hold();
  gate.Notify();
  f.executor.AwaitEntered(1);  // the jobs now sit in the executor, alive
  EXPECT_NE(raw[0]->prepared_on, raw[1]->prepared_on);
  f.executor.Release();
  outcomes.Await(2);
  EXPECT_EQ(f.executor.groups(), (std::vector<std::vector<int>>{{0, 1}}));
}

// One example whose preparation fails on the pool fails its whole call: every job of the
// group is refused with that status, none runs.
TEST(PreparingScheduler, AFailedPoolPreparationRefusesTheWholeGroup) {
  Fixture f(2, 8, /*max_batch=*/8);
  Outcomes outcomes(3);
  std::vector<WorkItem> call;
  call.emplace_back().job = std::make_unique<PreparingJob>(0, &outcomes);
  call.emplace_back().job = std::make_unique<PreparingJob>(
      1, &outcomes, nullptr, absl::InvalidArgumentError("not an image"));
  auto small = std::make_unique<PreparingJob>(2, &outcomes);
  small->on_caller = true;
  call.emplace_back().job = std::move(small);
  ASSERT_TRUE(f.scheduler->EnqueueGroup(std::move(call)).ok());  // fails later, on the pool
  outcomes.Await(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outcomes.refused(i), absl::StatusCode::kInvalidArgument) << i;
  }
  EXPECT_TRUE(f.executor.groups().empty());
  EXPECT_TRUE(DepthFallsTo(*f.scheduler, 0));  // the group has left preparation
}

// A call whose deadline passes while its examples wait for a pool thread is refused whole,
// unprepared: its example for the pool and the one with nothing to prepare.
TEST(PreparingScheduler, AGroupThatExpiresWaitingForThePoolIsRefusedWhole) {
  Fixture f(/*threads=*/1, 8, /*max_batch=*/8);
  Outcomes outcomes(3);
  absl::Notification gate;
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(0, &outcomes, &gate)).ok());  // holds the thread
  std::vector<WorkItem> call;
  call.emplace_back().job = std::make_unique<PreparingJob>(1, &outcomes);
  call.emplace_back().job = std::make_unique<RecordingJob>(2, &outcomes);  // nothing to prepare
  for (WorkItem& item : call) item.deadline = f.clock.Now() + absl::Seconds(1);
  ASSERT_TRUE(f.scheduler->EnqueueGroup(std::move(call)).ok());
  f.clock.Advance(absl::Seconds(2));
  gate.Notify();
  outcomes.Await(3);
  EXPECT_TRUE(outcomes.executed(0));
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(outcomes.refused(2), absl::StatusCode::kDeadlineExceeded);
}

// A call the pool refuses at its first example is refused whole at once, before
// EnqueueGroup returns.
TEST(PreparingScheduler, AGroupThePoolRefusesAtOnceIsRefusedWholeAtOnce) {
  Fixture f(/*threads=*/1, /*max_waiting=*/1, /*max_batch=*/8);
  Outcomes outcomes(4);
  absl::Notification gate;
  f.HoldAPoolThread(&outcomes, &gate);
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(1, &outcomes)).ok());  // the waiting place
  std::vector<WorkItem> call;
  call.emplace_back().job = std::make_unique<PreparingJob>(2, &outcomes);
  call.emplace_back().job = std::make_unique<RecordingJob>(3, &outcomes);
  EXPECT_EQ(f.scheduler->EnqueueGroup(std::move(call)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(outcomes.refused(2), absl::StatusCode::kResourceExhausted);  // already finished
  EXPECT_EQ(outcomes.refused(3), absl::StatusCode::kResourceExhausted);
  gate.Notify();
  outcomes.Await(4);
  EXPECT_TRUE(outcomes.executed(0));
  EXPECT_TRUE(outcomes.executed(1));
}

// A call the pool cannot take whole (its queue fills part-way) is refused whole with
// RESOURCE_EXHAUSTED: the examples it refused at once, the one it took when its turn
// comes, undecoded; none runs.
TEST(PreparingScheduler, AGroupThePoolCannotTakeWholeIsRefusedWhole) {
  Fixture f(/*threads=*/1, /*max_waiting=*/1, /*max_batch=*/8);
  Outcomes outcomes(4);
  absl::Notification gate;
  f.HoldAPoolThread(&outcomes, &gate);
  std::vector<WorkItem> call;
  std::atomic<int> preparations{0};
  for (int i = 1; i < 4; ++i) {
    auto job = std::make_unique<PreparingJob>(i, &outcomes);
    job->preparations = &preparations;
    call.emplace_back().job = std::move(job);
  }
  EXPECT_EQ(f.scheduler->EnqueueGroup(std::move(call)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(outcomes.finished(), 0);  // job 1 sits in the pool's queue, the call waits for it
  gate.Notify();
  outcomes.Await(4);
  EXPECT_EQ(preparations.load(), 0);  // the refused call's image was not decoded
  EXPECT_TRUE(outcomes.executed(0));
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(outcomes.refused(i), absl::StatusCode::kResourceExhausted) << i;
  }
  EXPECT_EQ(f.executor.groups(), (std::vector<std::vector<int>>{{0}}));
  EXPECT_TRUE(DepthFallsTo(*f.scheduler, 0));  // the group has left preparation
}

// The point of preparing ahead: a slow input holds up no other request of the model.
TEST(PreparingScheduler, SlowPreparationDoesNotHoldTheModel) {
  Fixture f;
  Outcomes outcomes(3);
  absl::Notification gate;
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(0, &outcomes, &gate)).ok());
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(1, &outcomes)).ok());
  ASSERT_TRUE(f.Add(std::make_unique<RecordingJob>(2, &outcomes)).ok());
  outcomes.Await(2);
  EXPECT_FALSE(outcomes.executed(0));
  EXPECT_TRUE(outcomes.executed(1));
  EXPECT_TRUE(outcomes.executed(2));
  gate.Notify();
  outcomes.Await(3);
  EXPECT_TRUE(outcomes.executed(0));
}

TEST(PreparingScheduler, FailedPreparationRefusesWithItsStatus) {
  Fixture f;
  Outcomes outcomes(1);
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(0, &outcomes, nullptr,
                                                   absl::InvalidArgumentError("bad image")))
                  .ok());
  outcomes.Await(1);
  EXPECT_EQ(outcomes.refused(0), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.executor.groups().empty());
}

TEST(PreparingScheduler, FullPoolRefusesAtOnce) {
  Fixture f(/*threads=*/1, /*max_waiting=*/1);
  Outcomes outcomes(3);
  absl::Notification gate;
  f.HoldAPoolThread(&outcomes, &gate);  // before job 1 takes the one waiting place
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(1, &outcomes)).ok());
  const absl::Status full = f.Add(std::make_unique<PreparingJob>(2, &outcomes));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(outcomes.refused(2), absl::StatusCode::kResourceExhausted);  // already finished
  gate.Notify();
  outcomes.Await(3);
  EXPECT_TRUE(outcomes.executed(0));
  EXPECT_TRUE(outcomes.executed(1));
}

TEST(PreparingScheduler, ExpiredWhileWaitingIsRefusedUnprepared) {
  Fixture f(/*threads=*/1);
  Outcomes outcomes(2);
  absl::Notification gate;
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(0, &outcomes, &gate)).ok());
  auto late = std::make_unique<PreparingJob>(1, &outcomes);
  ASSERT_TRUE(f.Add(std::move(late), f.clock.Now() + absl::Seconds(1)).ok());
  f.clock.Advance(absl::Seconds(2));
  gate.Notify();
  outcomes.Await(2);
  EXPECT_TRUE(outcomes.executed(0));
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kDeadlineExceeded);
}

// Stops the scheduler on another thread while a preparation waits for `gate`: whether Stop
// was still waiting 50 ms later; then opens the gate and waits for Stop to return.
bool StopWaitsForTheGate(Fixture& f, absl::Notification& gate) {
  absl::Notification stopped;
  std::thread stopper([&] {
    f.scheduler->Stop();
    stopped.Notify();
  });
  const bool waited = !stopped.WaitForNotificationWithTimeout(absl::Milliseconds(50));
  gate.Notify();
  stopped.WaitForNotification();
  stopper.join();
  return waited;
}

TEST(PreparingScheduler, StopWaitsForPreparationThenDrains) {
  Fixture f;
  Outcomes outcomes(2);
  absl::Notification gate;
  ASSERT_TRUE(f.Add(std::make_unique<PreparingJob>(0, &outcomes, &gate)).ok());
  EXPECT_TRUE(StopWaitsForTheGate(f, gate));
  EXPECT_TRUE(outcomes.executed(0));  // prepared, queued and drained by the batcher's Stop
  const absl::Status late = f.Add(std::make_unique<PreparingJob>(1, &outcomes));
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcomes.refused(1), absl::StatusCode::kUnavailable);
}

// Stop waits for a call still in preparation, which is then queued whole and drained; a
// call after Stop is refused whole.
TEST(PreparingScheduler, StopWaitsForAGroupInPreparation) {
  Fixture f(2, 8, /*max_batch=*/8);
  Outcomes outcomes(4);
  absl::Notification gate;
  std::vector<WorkItem> call;
  call.emplace_back().job = std::make_unique<PreparingJob>(0, &outcomes, &gate);
  call.emplace_back().job = std::make_unique<RecordingJob>(1, &outcomes);
  ASSERT_TRUE(f.scheduler->EnqueueGroup(std::move(call)).ok());
  EXPECT_TRUE(StopWaitsForTheGate(f, gate));
  EXPECT_EQ(f.executor.groups(), (std::vector<std::vector<int>>{{0, 1}}));
  std::vector<WorkItem> late;
  late.emplace_back().job = std::make_unique<PreparingJob>(2, &outcomes);
  late.emplace_back().job = std::make_unique<RecordingJob>(3, &outcomes);
  EXPECT_EQ(f.scheduler->EnqueueGroup(std::move(late)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcomes.refused(2), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcomes.refused(3), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gatescope
