// The batch-forming policy, driven with explicit (fake) times.
#include "server/batching/batch_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace gatescope {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1000);
absl::Time At(int us) { return t0 + absl::Microseconds(us); }

DynamicBatchingConfig Config(int max_batch, int delay_us) {
  DynamicBatchingConfig c;
  c.max_batch_size = max_batch;
  c.max_queue_delay = absl::Microseconds(delay_us);
  return c;
}

using Queue = BatchQueue<int>;

void Push(Queue& q, int id, absl::Time now, uint64_t key = 0, int priority = 0,
          absl::Time deadline = absl::InfiniteFuture(), absl::Duration timeout = {}) {
  ASSERT_TRUE(q.Push(id, now, deadline, key, priority, timeout).ok());
}

std::vector<int> Ids(const std::vector<Queue::Entry>& entries) {
  std::vector<int> ids;
  for (const auto& e : entries) ids.push_back(e.payload);
  return ids;
}

TEST(BatchQueueTest, WaitsForMaxQueueDelayThenRunsWhatIsThere) {
  Queue q(Config(4, 100));
  Push(q, 1, At(0));
  Push(q, 2, At(30));
  auto d = q.Next(At(30));
  EXPECT_TRUE(d.batch.empty());
  ASSERT_TRUE(d.wake_at.has_value());
  EXPECT_EQ(*d.wake_at, At(100));  // measured from the oldest request
  EXPECT_TRUE(q.Next(At(99)).batch.empty());
  d = q.Next(At(100));
  EXPECT_EQ(Ids(d.batch), (std::vector<int>{1, 2}));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.Next(At(200)).wake_at.has_value());  // idle
}

TEST(BatchQueueTest, FullBatchRunsAtOnceAndRestWaits) {
  Queue q(Config(3, 1000));
  for (int i = 1; i <= 5; ++i) Push(q, i, At(i));
  auto d = q.Next(At(5));
  EXPECT_EQ(Ids(d.batch), (std::vector<int>{1, 2, 3}));
  d = q.Next(At(5));
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(*d.wake_at, At(1004));
  EXPECT_EQ(Ids(q.Next(At(1004)).batch), (std::vector<int>{4, 5}));
}

TEST(BatchQueueTest, ZeroDelayRunsImmediately) {
  Queue q(Config(8, 0));
  Push(q, 1, At(0));
  EXPECT_EQ(Ids(q.Next(At(0)).batch), (std::vector<int>{1}));
}

TEST(BatchQueueTest, PreferredSizeRunsWithoutWaiting) {
  auto c = Config(8, 1000000);
  c.preferred_batch_sizes = {4, 2};
  ASSERT_TRUE(NormaliseBatchingConfig(c).ok());
  Queue q(c);
  Push(q, 1, At(0));
  EXPECT_TRUE(q.Next(At(0)).batch.empty());
  Push(q, 2, At(1));
  Push(q, 3, At(2));
  // three waiting: the largest preferred size reached is 2
  EXPECT_EQ(Ids(q.Next(At(2)).batch), (std::vector<int>{1, 2}));
  for (int i = 4; i <= 7; ++i) Push(q, i, At(i));
  EXPECT_EQ(Ids(q.Next(At(7)).batch), (std::vector<int>{3, 4, 5, 6}));
  EXPECT_TRUE(q.Next(At(7)).batch.empty());  // 7 waits for company or the delay
}

TEST(BatchQueueTest, HigherPriorityIsServedFirst) {
  auto c = Config(2, 0);
  c.priority_levels = 3;
  c.default_priority_level = 2;
  ASSERT_TRUE(NormaliseBatchingConfig(c).ok());
  Queue q(c);
  Push(q, 1, At(0), 0, /*priority=*/3);
  Push(q, 2, At(1));  // default level 2
  Push(q, 3, At(2), 0, /*priority=*/1);
  EXPECT_EQ(Ids(q.Next(At(2)).batch), (std::vector<int>{3, 2}));
  EXPECT_EQ(Ids(q.Next(At(2)).batch), (std::vector<int>{1}));
  int bad = 9;
  EXPECT_EQ(q.Push(bad, At(3), absl::InfiniteFuture(), 0, 4, {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BatchQueueTest, DifferentShapesAreNeverBatchedTogether) {
  Queue q(Config(4, 0));
  Push(q, 1, At(0), /*key=*/7);
  Push(q, 2, At(1), /*key=*/8);
  Push(q, 3, At(2), /*key=*/7);
  EXPECT_EQ(Ids(q.Next(At(2)).batch), (std::vector<int>{1, 3}));
  EXPECT_EQ(Ids(q.Next(At(2)).batch), (std::vector<int>{2}));
}

TEST(BatchQueueTest, QueueTimeoutRejects) {
  auto c = Config(4, 1000);
  c.queue_policy.default_timeout = absl::Microseconds(50);
  Queue q(c);
  Push(q, 1, At(0));
  Push(q, 2, At(40));
  auto d = q.Next(At(10));
  EXPECT_EQ(*d.wake_at, At(50));  // woken for the expiry, before the batch delay
  EXPECT_EQ(Ids(q.TakeExpired(At(60))), (std::vector<int>{1}));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(Ids(q.TakeExpired(At(90))), (std::vector<int>{2}));
}

TEST(BatchQueueTest, QueueTimeoutDelaysBehindOthers) {
  auto c = Config(1, 0);
  c.queue_policy.default_timeout = absl::Microseconds(50);
  c.queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  Queue q(c);
  Push(q, 1, At(0));
  Push(q, 2, At(40));
  EXPECT_TRUE(q.TakeExpired(At(60)).empty());  // 1 is delayed, not dropped
  EXPECT_EQ(Ids(q.Next(At(60)).batch), (std::vector<int>{2}));
  EXPECT_EQ(Ids(q.Next(At(60)).batch), (std::vector<int>{1}));
}

TEST(BatchQueueTest, ClientDeadlineAlwaysRejects) {
  auto c = Config(4, 1000);
  c.queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  Queue q(c);
  Push(q, 1, At(0), 0, 0, /*deadline=*/At(20));
  Push(q, 2, At(0));
  EXPECT_EQ(*q.Next(At(0)).wake_at, At(20));
  EXPECT_EQ(Ids(q.TakeExpired(At(20))), (std::vector<int>{1}));
}

TEST(BatchQueueTest, TimeoutOverrideOnlyWhenAllowed) {
  auto c = Config(4, 1000);
  c.queue_policy.default_timeout = absl::Microseconds(500);
  Queue strict(c);
  Push(strict, 1, At(0), 0, 0, absl::InfiniteFuture(), absl::Microseconds(10));
  EXPECT_TRUE(strict.TakeExpired(At(20)).empty());
  c.queue_policy.allow_timeout_override = true;
  Queue loose(c);
  Push(loose, 1, At(0), 0, 0, absl::InfiniteFuture(), absl::Microseconds(10));
  EXPECT_EQ(Ids(loose.TakeExpired(At(20))), (std::vector<int>{1}));
}

TEST(BatchQueueTest, FullLevelIsResourceExhausted) {
  auto c = Config(4, 1000);
  c.queue_policy.max_queue_size = 2;
  Queue q(c);
  Push(q, 1, At(0));
  Push(q, 2, At(0));
  int third = 3;
  EXPECT_EQ(q.Push(third, At(0), absl::InfiniteFuture(), 0, 0, {}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third, 3);  // left with the caller
}

TEST(BatchQueueTest, DelayedEntriesStillCountAgainstTheLimit) {
  auto c = Config(1, 0);
  c.queue_policy.default_timeout = absl::Microseconds(1);
  c.queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  c.queue_policy.max_queue_size = 2;
  Queue q(c);
  Push(q, 1, At(0));
  Push(q, 2, At(0));
  EXPECT_TRUE(q.TakeExpired(At(10)).empty());  // both demoted, still waiting
  int third = 3;
  EXPECT_EQ(q.Push(third, At(10), absl::InfiniteFuture(), 0, 0, {}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Ids(q.Next(At(10)).batch), (std::vector<int>{1}));
  EXPECT_TRUE(q.Push(third, At(10), absl::InfiniteFuture(), 0, 0, {}).ok());  // room again
}

TEST(BatchQueueTest, DelayRunsFromTheOldestRequestInTheBatch) {
  auto c = Config(4, 100);
  c.priority_levels = 2;
  c.default_priority_level = 2;
  ASSERT_TRUE(NormaliseBatchingConfig(c).ok());
  Queue q(c);
  Push(q, 1, At(0), 0, /*priority=*/2);   // old, low priority
  Push(q, 2, At(80), 0, /*priority=*/1);  // new, high priority leads the batch
  auto d = q.Next(At(80));
  EXPECT_EQ(*d.wake_at, At(100));  // not 180: request 1 has waited since 0
  EXPECT_EQ(Ids(q.Next(At(100)).batch), (std::vector<int>{2, 1}));
}

TEST(BatchQueueTest, FlushIgnoresTheDelay) {
  Queue q(Config(4, 1000000));
  Push(q, 1, At(0));
  EXPECT_EQ(Ids(q.Next(At(0), /*flush=*/true).batch), (std::vector<int>{1}));
}

TEST(BatchQueueTest, AloneEntriesLeadABatchOfOneAtOnceAndJoinNone) {
  Queue q(Config(4, 100));
  int two = 2, four = 4;
  Push(q, 1, At(0));
  ASSERT_TRUE(q.Push(two, At(0), absl::InfiniteFuture(), 0, 0, {}, /*alone=*/true).ok());
  Push(q, 3, At(0));
  ASSERT_TRUE(q.Push(four, At(0), absl::InfiniteFuture(), 0, 0, {}, /*alone=*/true).ok());
  // The head (1) waits for a fuller batch and takes 3, skipping the alone entries.
  auto first = q.Next(At(100));
  EXPECT_EQ(Ids(first.batch), (std::vector<int>{1, 3}));
  // An alone head runs at once, before its delay, by itself.
  auto second = q.Next(At(100));
  EXPECT_EQ(Ids(second.batch), (std::vector<int>{2}));
  EXPECT_EQ(Ids(q.Next(At(100)).batch), (std::vector<int>{4}));
  EXPECT_EQ(q.size(), 0u);
}

DynamicBatchingConfig EarlyRelease(int max_batch, int delay_us) {
  DynamicBatchingConfig c = Config(max_batch, delay_us);
  c.release_when_arrivals_are_sparse = true;
  return c;
}

TEST(BatchQueueTest, SparseArrivalsRunWithoutTheDelay) {
  Queue q(EarlyRelease(8, 100));
  Push(q, 1, At(0));
  auto d = q.Next(At(0));  // no gap seen yet: waits the delay
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(*d.wake_at, At(100));
  EXPECT_EQ(Ids(q.Next(At(100)).batch), (std::vector<int>{1}));
  Push(q, 2, At(1000));  // gap 1000 us, counted as 200: longer than the 100 us left
  EXPECT_EQ(Ids(q.Next(At(1000)).batch), (std::vector<int>{2}));
  Push(q, 3, At(2000));
  EXPECT_EQ(Ids(q.Next(At(2000)).batch), (std::vector<int>{3}));
}

TEST(BatchQueueTest, AFirstRequestLongAfterTheQueueOpenedRunsWithoutTheDelay) {
  // Quiet since the model loaded: the wait from the opening is the first gap (200 us, as
  // capped), longer than the 100 us the request has left to wait.
  Queue q(EarlyRelease(8, 100), /*opened=*/At(0));
  Push(q, 1, At(5000));
  EXPECT_EQ(Ids(q.Next(At(5000)).batch), (std::vector<int>{1}));
  Push(q, 2, At(6000));
  EXPECT_EQ(Ids(q.Next(At(6000)).batch), (std::vector<int>{2}));
  // A burst right after the opening: the gap is short, so the batch waits for company
  // until the rest of its delay is shorter than that gap.
  Queue burst(EarlyRelease(8, 100), /*opened=*/At(0));
  Push(burst, 1, At(20));
  auto d = burst.Next(At(20));
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(*d.wake_at, At(100));  // the release (120) less the gap (20)
  Push(burst, 2, At(30));  // a gap of 10 us: mean 20 - 10 / 8
  auto later = burst.Next(At(30));
  EXPECT_TRUE(later.batch.empty());
  EXPECT_EQ(*later.wake_at, At(120) - absl::Nanoseconds(18750));
  EXPECT_EQ(Ids(burst.Next(*later.wake_at).batch), (std::vector<int>{1, 2}));
  // Without early release the opening changes nothing.
  Queue off(Config(8, 100), /*opened=*/At(0));
  Push(off, 1, At(5000));
  EXPECT_EQ(*off.Next(At(5000)).wake_at, At(5100));
}

TEST(BatchQueueTest, DenseArrivalsWaitUntilTheNextIsNotExpectedInTime) {
  Queue q(EarlyRelease(8, 100));
  for (int i = 0; i < 4; ++i) Push(q, i + 1, At(10 * i));  // gaps of 10 us
  auto d = q.Next(At(30));
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(*d.wake_at, At(90));  // the release (100) less the mean gap (10)
  EXPECT_TRUE(q.Next(At(89)).batch.empty());
  EXPECT_EQ(Ids(q.Next(At(90)).batch), (std::vector<int>{1, 2, 3, 4}));
}

TEST(BatchQueueTest, OneLongGapDoesNotOutweighADenseHistory) {
  Queue q(EarlyRelease(64, 100));
  for (int i = 0; i < 9; ++i) Push(q, i, At(10 * i));  // mean gap 10 us
  EXPECT_EQ(q.Next(At(100)).batch.size(), 9u);
  Push(q, 9, At(100000));  // an idle 100 ms counts as 200 us: mean 10 + 190 / 8
  auto d = q.Next(At(100000));
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(*d.wake_at, At(100100) - absl::Nanoseconds(33750));
}

TEST(BatchQueueTest, AloneEntriesDoNotCountAsArrivals) {
  Queue q(EarlyRelease(8, 100));
  for (int i = 0; i < 4; ++i) Push(q, i, At(1000 * i));  // sparse: mean gap 200 (capped)
  for (int i = 0; i < 4; ++i) q.Next(At(1000 * i + 100));
  // Explanations arriving densely do not make the next prediction wait for company.
  // (Counted, 20 gaps of 1 us would bring the mean to 39 us, under the 100 us delay.)
  for (int i = 0; i < 20; ++i) {
    int id = 100 + i;
    ASSERT_TRUE(q.Push(id, At(4000 + i), absl::InfiniteFuture(), 0, 0, {}, /*alone=*/true).ok());
    ASSERT_EQ(q.Next(At(4000 + i)).batch.size(), 1u);
  }
  Push(q, 7, At(5000));
  EXPECT_EQ(Ids(q.Next(At(5000)).batch), (std::vector<int>{7}));
}

TEST(BatchQueueTest, TheExamplesOfOneCallAreOneArrival) {
  // Calls of four examples, 1 ms apart: sparse, so each call runs at once. Counted one by
  // one, the three gaps of 0 us inside each call would bring the mean under the delay and
  // every call would wait for company that is not coming.
  Queue q(EarlyRelease(8, 100));
  for (int call = 0; call < 4; ++call) {
    for (int i = 0; i < 4; ++i) {
      int id = 4 * call + i;
      ASSERT_TRUE(q.Push(id, At(1000 * call), absl::InfiniteFuture(), 0, 0, {},
                         /*alone=*/false, /*arrival=*/i == 0)
                      .ok());
    }
    auto d = q.Next(At(1000 * call));
    if (call == 0) {  // no gap seen yet: the first call waits the delay
      EXPECT_TRUE(d.batch.empty());
      d = q.Next(At(100));
    }
    EXPECT_EQ(d.batch.size(), 4u) << call;
  }
}

TEST(BatchQueueTest, WithoutEarlyReleaseSparseArrivalsWaitTheDelay) {
  Queue q(Config(8, 100));
  for (int i = 0; i < 3; ++i) {
    Push(q, i, At(1000 * i));
    auto d = q.Next(At(1000 * i));
    EXPECT_TRUE(d.batch.empty());
    EXPECT_EQ(*d.wake_at, At(1000 * i + 100));
    EXPECT_EQ(q.Next(At(1000 * i + 100)).batch.size(), 1u);
  }
}

TEST(NormaliseBatchingConfigTest, RejectsBadFields) {
  auto c = Config(4, 0);
  c.preferred_batch_sizes = {8};
  EXPECT_FALSE(NormaliseBatchingConfig(c).ok());
  c = Config(0, 0);
  EXPECT_FALSE(NormaliseBatchingConfig(c).ok());
  c = Config(4, 0);
  c.priority_levels = 2;
  EXPECT_FALSE(NormaliseBatchingConfig(c).ok());  // needs a default level
  c.default_priority_level = 3;
  EXPECT_FALSE(NormaliseBatchingConfig(c).ok());
  c.default_priority_level = 2;
  EXPECT_TRUE(NormaliseBatchingConfig(c).ok());
}

}  // namespace
}  // namespace gatescope
