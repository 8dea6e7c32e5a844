#include "server/batching/dynamic_batcher.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_runner.h"

namespace gatescope {
namespace {

using testing::FakeClock;
using testing::FakeRunner;

// Collects results of many items; thread-safe.
struct Results {
  absl::Mutex mu;
  std::vector<absl::StatusOr<NamedTensors>> by_index ABSL_GUARDED_BY(mu);
  int finished ABSL_GUARDED_BY(mu) = 0;

  explicit Results(int n) : by_index(n, absl::UnknownError("not finished")) {}
  void Await(int n) {
    absl::MutexLock l(&mu);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return finished >= n; };
    mu.Await(absl::Condition(&done));
  }
};

std::unique_ptr<DynamicBatcher> Make(FakeRunner* runner, const Clock* clock, int max_batch,
                                     int max_queue, int delay_us = 0) {
  DynamicBatchingConfig config;
  config.max_batch_size = max_batch;
  config.queue_policy.max_queue_size = max_queue;
  config.max_queue_delay = absl::Microseconds(delay_us);
  return DynamicBatcher::Create({runner}, config, clock).value();
}

WorkItem Item(float value, int index, Results* results) {
  WorkItem item;
  item.make_input = [value] { return at::full({2, 2}, value); };
  item.done = [index, results](absl::StatusOr<NamedTensors> out) {
    absl::MutexLock l(&results->mu);
    results->by_index[index] = std::move(out);
    ++results->finished;
  };
  return item;
}

TEST(DynamicBatcherTest, BatchesQueuedItemsAndSlicesOutputs) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 4, 100);
  Results results(7);
  runner.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(0.f, 0, &results)).ok());
  runner.AwaitEntered(1);  // the worker is busy with item 0; the rest queue up
  for (int i = 1; i < 7; ++i) ASSERT_TRUE(batcher->Enqueue(Item(float(i), i, &results)).ok());
  EXPECT_EQ(batcher->QueueDepth(), 6);
  runner.Release();
  results.Await(7);
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{1, 4, 2}));
  absl::MutexLock l(&results.mu);
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(results.by_index[i].ok()) << i;
    const at::Tensor logits = results.by_index[i]->at("logits");
    ASSERT_EQ(logits.dim(), 1);
    // sum of a 2x2 tensor filled with i is 4i; times [1, 2, 3]
    EXPECT_FLOAT_EQ(logits[2].item<float>(), 12.f * i) << i;
  }
}

TEST(DynamicBatcherTest, ExplainArgsAreComputedAfterTheInputAndReachTheRunner) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 4, 100);
  Results results(3);
  for (int i = 0; i < 3; ++i) {
    WorkItem item = Item(1.f, i, &results);
    auto seen = std::make_shared<int>(0);  // written by make_input, read by explain_args
    item.make_input = [seen, i] {
      *seen = 10 + i;
      return at::ones({2, 2});
    };
    auto layers = std::make_shared<std::vector<int>>();
    item.explain_layers = 2;
    item.explain_layer = [layers](int l, const NamedTensors& maps) {
      EXPECT_EQ(maps.at("layer").dim(), 0);  // batch dim removed
      layers->push_back(l);
      return absl::OkStatus();
    };
    if (i == 1) {
      item.explain_args = []() -> absl::StatusOr<std::vector<double>> {
        return absl::InvalidArgumentError("query outside the input");
      };
    } else if (i == 2) {
      item.explain_args = [seen]() -> absl::StatusOr<std::vector<double>> {
        return std::vector<double>{double(*seen), 0.5};
      };
    }
    ASSERT_TRUE(batcher->Enqueue(std::move(item)).ok());
  }
  results.Await(3);
  // Item 0 has no extra arguments; item 1 never ran; item 2 saw what make_input wrote.
  EXPECT_EQ(runner.explain_args(),
            (std::vector<std::vector<double>>{{}, {12.0, 0.5}}));
  absl::MutexLock l(&results.mu);
  EXPECT_TRUE(results.by_index[0].ok());
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(results.by_index[2].ok());
}

TEST(DynamicBatcherTest, FullQueueIsResourceExhausted) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 1, 2);
  Results results(4);
  runner.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  runner.AwaitEntered(1);
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 1, &results)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 2, &results)).ok());
  const absl::Status st = batcher->Enqueue(Item(1.f, 3, &results));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  runner.Release();
  results.Await(3);  // the accepted ones still finish
  absl::MutexLock l(&results.mu);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(results.by_index[i].ok());
  EXPECT_EQ(results.by_index[3].status().code(), absl::StatusCode::kUnknown);  // never called
}

TEST(DynamicBatcherTest, BadInputFailsAloneAndOthersRun) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 8, 100);
  Results results(3);
  runner.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  runner.AwaitEntered(1);
  WorkItem bad = Item(0.f, 1, &results);
  bad.make_input = [] { return absl::StatusOr<at::Tensor>(absl::InvalidArgumentError("bad")); };
  ASSERT_TRUE(batcher->Enqueue(std::move(bad)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(2.f, 2, &results)).ok());
  runner.Release();
  results.Await(3);
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(results.by_index[2].ok());
  EXPECT_FLOAT_EQ(results.by_index[2]->at("logits")[0].item<float>(), 8.f);
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{1, 1}));
}

TEST(DynamicBatcherTest, ExpiredItemsAreNotRun) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 8, 100);
  Results results(3);
  runner.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  runner.AwaitEntered(1);
  WorkItem late = Item(1.f, 1, &results);
  late.deadline = clock.Now() + absl::Seconds(1);
  WorkItem fine = Item(1.f, 2, &results);
  fine.deadline = clock.Now() + absl::Seconds(10);
  ASSERT_TRUE(batcher->Enqueue(std::move(late)).ok());
  ASSERT_TRUE(batcher->Enqueue(std::move(fine)).ok());
  clock.Advance(absl::Seconds(5));
  runner.Release();
  results.Await(3);
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(results.by_index[2].ok());
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{1, 1}));
}

TEST(DynamicBatcherTest, RunnerErrorReachesEveryItemOfTheBatch) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 8, 100);
  runner.FailWith(absl::InternalError("boom"));
  Results results(2);
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 1, &results)).ok());
  results.Await(2);
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.by_index[0].status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInternal);
}

TEST(DynamicBatcherTest, StopDrainsThenRefuses) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 2, 100);
  Results results(5);
  runner.Hold();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(batcher->Enqueue(Item(1.f, i, &results)).ok());
  runner.AwaitEntered(1);
  runner.Release();
  batcher->Stop();
  {
    absl::MutexLock l(&results.mu);
    EXPECT_EQ(results.finished, 5);
  }
  EXPECT_EQ(batcher->Enqueue(Item(1.f, 0, &results)).code(), absl::StatusCode::kUnavailable);
}

TEST(DynamicBatcherTest, ThrowingInputAndCancelledItemsFinishAlone) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 8, 100);
  Results results(4);
  runner.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  runner.AwaitEntered(1);
  WorkItem throws = Item(0.f, 1, &results);
  throws.make_input = []() -> absl::StatusOr<at::Tensor> { throw std::runtime_error("oops"); };
  WorkItem gone = Item(0.f, 2, &results);
  gone.cancelled = [] { return true; };
  ASSERT_TRUE(batcher->Enqueue(std::move(throws)).ok());
  ASSERT_TRUE(batcher->Enqueue(std::move(gone)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(3.f, 3, &results)).ok());
  runner.Release();
  results.Await(4);
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(std::string(results.by_index[1].status().message()).find("oops"), std::string::npos);
  EXPECT_EQ(results.by_index[2].status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(results.by_index[3].ok());
  EXPECT_FLOAT_EQ(results.by_index[3]->at("logits")[0].item<float>(), 12.f);
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{1, 1}));
}

TEST(DynamicBatcherTest, RejectsBadOptions) {
  FakeRunner runner;
  FakeClock clock;
  DynamicBatchingConfig bad;
  bad.max_batch_size = 0;
  EXPECT_FALSE(DynamicBatcher::Create({&runner}, bad, &clock).ok());
  EXPECT_FALSE(DynamicBatcher::Create({nullptr}, DynamicBatchingConfig(), &clock).ok());
  EXPECT_FALSE(DynamicBatcher::Create({}, DynamicBatchingConfig(), &clock).ok());
}

TEST(DynamicBatcherTest, WaitsForAFullerBatchWithinTheDelay) {
  FakeRunner runner;
  const Clock* clock = RealClock::Get();
  DynamicBatchingConfig config;
  config.max_batch_size = 4;
  config.max_queue_delay = absl::Seconds(30);  // only a full batch may run
  auto batcher = DynamicBatcher::Create({&runner}, config, clock).value();
  Results results(4);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(batcher->Enqueue(Item(float(i), i, &results)).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(runner.batch_sizes().empty());  // three are waiting for a fourth
  ASSERT_TRUE(batcher->Enqueue(Item(3.f, 3, &results)).ok());
  results.Await(4);
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{4}));
}

TEST(DynamicBatcherTest, DifferentShapesRunInSeparateCalls) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 8, 100);
  Results results(4);
  runner.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  runner.AwaitEntered(1);
  for (int i = 1; i < 4; ++i) {
    WorkItem item = Item(1.f, i, &results);
    if (i == 2) item.make_input = [] { return at::full({3, 3}, 1.f); };  // other shape
    ASSERT_TRUE(batcher->Enqueue(std::move(item)).ok());
  }
  runner.Release();
  results.Await(4);
  absl::MutexLock l(&results.mu);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(results.by_index[i].ok()) << i;
  EXPECT_FLOAT_EQ(results.by_index[2]->at("logits")[0].item<float>(), 9.f);  // 3x3 of ones
  EXPECT_FLOAT_EQ(results.by_index[3]->at("logits")[0].item<float>(), 4.f);
  auto sizes = runner.batch_sizes();
  std::sort(sizes.begin() + 1, sizes.end());
  EXPECT_EQ(sizes, (std::vector<int64_t>{1, 1, 2}));
}

TEST(DynamicBatcherTest, StopFromSeveralThreadsAtOnce) {
  FakeRunner runner;
  FakeClock clock;
  auto batcher = Make(&runner, &clock, 4, 100);
  Results results(3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(batcher->Enqueue(Item(1.f, i, &results)).ok());
  std::thread a([&] { batcher->Stop(); });
  std::thread b([&] { batcher->Stop(); });
  a.join();
  b.join();
  results.Await(3);
}

TEST(DynamicBatcherTest, InstancesRunConcurrently) {
  FakeRunner a, b;
  FakeClock clock;
  DynamicBatchingConfig config;
  config.max_batch_size = 1;
  auto batcher = DynamicBatcher::Create({&a, &b}, config, &clock).value();
  Results results(2);
  a.Hold();
  b.Hold();
  ASSERT_TRUE(batcher->Enqueue(Item(1.f, 0, &results)).ok());
  ASSERT_TRUE(batcher->Enqueue(Item(2.f, 1, &results)).ok());
  a.AwaitEntered(1);  // both instances hold one request at the same time
  b.AwaitEntered(1);
  a.Release();
  b.Release();
  results.Await(2);
}

}  // namespace
}  // namespace gatescope
