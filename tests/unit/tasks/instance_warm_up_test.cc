// Warm-up before an instance serves: which calls, on which example, and what a failure does.
#include "server/tasks/instance_warm_up.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/mocks/fake_runner.h"
#include "tests/unit/tasks/task_test_util.h"

namespace gatescope {
namespace {

using testing::FakeRunner;

std::vector<std::pair<int64_t, int>> Pairs(const std::vector<WarmUpCall>& calls) {
  std::vector<std::pair<int64_t, int>> out;
  for (const WarmUpCall& c : calls) out.emplace_back(c.batch, c.count);
  return out;
}

InstanceSpec Spec(InstanceSpec::Kind kind, bool graphs, int max_batch) {
  InstanceSpec spec;
  spec.kind = kind;
  spec.cuda_graphs = graphs;
  spec.max_batch_size = max_batch;
  return spec;
}

std::unique_ptr<Task> Classifier() { return testing::ImageClassifier({1, 3, 2}); }

TEST(WarmUpCallsTest, BatchOneTwiceUnlessAGpuInstanceRecordsGraphs) {
  using Calls = std::vector<std::pair<int64_t, int>>;
  EXPECT_EQ(Pairs(WarmUpCalls(Spec(InstanceSpec::Kind::kCpu, false, 32))), (Calls{{1, 2}}));
  // cuda_graphs means nothing on a CPU instance; a GPU instance without graphs profiles only.
  EXPECT_EQ(Pairs(WarmUpCalls(Spec(InstanceSpec::Kind::kCpu, true, 32))), (Calls{{1, 2}}));
  EXPECT_EQ(Pairs(WarmUpCalls(Spec(InstanceSpec::Kind::kGpu, false, 32))), (Calls{{1, 2}}));
  // With graphs: every bucket the policy pads to, each to its recording (2 warm-up calls,
  // then the recording call).
  EXPECT_EQ(Pairs(WarmUpCalls(Spec(InstanceSpec::Kind::kGpu, true, 6))),
            (Calls{{1, 3}, {2, 3}, {4, 3}, {6, 3}}));
  EXPECT_EQ(Pairs(WarmUpCalls(Spec(InstanceSpec::Kind::kGpu, true, 8))),
            (Calls{{1, 3}, {2, 3}, {4, 3}, {8, 3}}));
  EXPECT_EQ(Pairs(WarmUpCalls(Spec(InstanceSpec::Kind::kGpu, true, 1))), (Calls{{1, 3}}));
}

TEST(WarmUpTest, RunsEachCallOnGatheredZeroExamplesOfTheModelsSize) {
  auto task = Classifier();
  auto example = task->WarmUpExample();
  ASSERT_TRUE(example.ok()) << example.status();
  EXPECT_EQ(example->sizes().vec(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(example->scalar_type(), at::kFloat);
  EXPECT_EQ(example->abs().sum().item<float>(), 0.0f);

  FakeRunner runner;
  ASSERT_TRUE(WarmUp(runner, *task, {{1, 2}, {4, 3}}).ok());
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{1, 1, 4, 4, 4}));
}

TEST(WarmUpTest, StopsAtTheFirstFailureAndSaysWhere) {
  auto task = Classifier();
  FakeRunner runner;
  runner.FailWith(absl::InternalError("model broke"));
  const absl::Status st = WarmUp(runner, *task, {{2, 2}, {4, 3}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("warm-up forward at batch 2: model broke"), std::string::npos)
      << st;
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{2}));
}

// An assembly without a warm-up example: nothing runs.
class NoExample : public BatchAssembly {
 public:
  absl::StatusOr<std::vector<GatheredBatch>> Gather(const std::vector<at::Tensor>&) const override {
    return std::vector<GatheredBatch>{};
  }
  absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t,
                                       const at::Tensor&) const override {
    return outputs;
  }
};

TEST(WarmUpTest, ATaskWithoutAnExampleIsUnimplementedAndRunsNothing) {
  NoExample assembly;
  FakeRunner runner;
  EXPECT_EQ(WarmUp(runner, assembly, {{1, 2}}).code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(runner.batch_sizes().empty());
}

}  // namespace
}  // namespace gatescope
