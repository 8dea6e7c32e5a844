// Warm-up before an instance serves: which calls, on which example, and what a failure does.
#include "server/tasks/instance_warm_up.h"

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
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

// An instance's calls for the model's `samples`, as the repository makes them.
absl::StatusOr<std::vector<WarmUpCall>> CallsFor(
    const InstanceSpec& spec, const std::vector<::inference::ModelWarmup>& samples,
    const Task& task) {
  auto sample_calls = SampleWarmUpCalls(samples, task);
  if (!sample_calls.ok()) return sample_calls.status();
  return WarmUpCalls(spec, *std::move(sample_calls));
}

std::vector<std::pair<int64_t, int>> Pairs(const InstanceSpec& spec,
                                           const std::vector<::inference::ModelWarmup>& samples = {}) {
  auto calls = CallsFor(spec, samples, *Classifier());
  EXPECT_TRUE(calls.ok()) << calls.status();
  return calls.ok() ? Pairs(*calls) : std::vector<std::pair<int64_t, int>>{};
}

TEST(WarmUpCallsTest, BatchOneTwiceUnlessAGpuInstanceRecordsGraphs) {
  using Calls = std::vector<std::pair<int64_t, int>>;
  EXPECT_EQ(Pairs(Spec(InstanceSpec::Kind::kCpu, false, 32)), (Calls{{1, 2}}));
  // cuda_graphs means nothing on a CPU instance; a GPU instance without graphs profiles only.
  EXPECT_EQ(Pairs(Spec(InstanceSpec::Kind::kCpu, true, 32)), (Calls{{1, 2}}));
  EXPECT_EQ(Pairs(Spec(InstanceSpec::Kind::kGpu, false, 32)), (Calls{{1, 2}}));
  // With graphs: every bucket the policy pads to, each to its recording (2 warm-up calls,
  // then the recording call); batch 1's profile the forward too.
  EXPECT_EQ(Pairs(Spec(InstanceSpec::Kind::kGpu, true, 6)),
            (Calls{{1, 3}, {2, 3}, {4, 3}, {6, 3}}));
  EXPECT_EQ(Pairs(Spec(InstanceSpec::Kind::kGpu, true, 8)),
            (Calls{{1, 3}, {2, 3}, {4, 3}, {8, 3}}));
  EXPECT_EQ(Pairs(Spec(InstanceSpec::Kind::kGpu, true, 1)), (Calls{{1, 3}}));
}

::inference::ModelWarmup Sample(const std::string& name, uint32_t batch, uint32_t count,
                                const std::string& input, ::inference::DataType type,
                                std::vector<int64_t> dims, bool random = false) {
  ::inference::ModelWarmup w;
  w.set_name(name);
  w.set_batch_size(batch);
  w.set_count(count);
  auto& in = (*w.mutable_inputs())[input];
  in.set_data_type(type);
  for (int64_t d : dims) in.add_dims(d);
  random ? in.set_random_data(true) : in.set_zero_data(true);
  return w;
}

TEST(WarmUpCallsTest, ConfiguredSamplesReplaceTheDefaultAndKeepTheGraphBuckets) {
  auto task = Classifier();
  const auto zeros = Sample("z", 4, 0, "input", ::inference::TYPE_FP32, {1, 3, 2});
  const auto noise = Sample("r", 2, 3, "input", ::inference::TYPE_FP32, {1, 3, 2}, true);
  auto calls = CallsFor(Spec(InstanceSpec::Kind::kCpu, false, 8), {zeros, noise}, *task);
  ASSERT_TRUE(calls.ok()) << calls.status();
  using Calls = std::vector<std::pair<int64_t, int>>;
  EXPECT_EQ(Pairs(*calls), (Calls{{4, 1}, {2, 3}}));  // count 0 means once, as in Triton
  ASSERT_TRUE((*calls)[0].example.defined() && (*calls)[1].example.defined());
  EXPECT_EQ((*calls)[0].example.sizes().vec(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ((*calls)[0].example.abs().sum().item<float>(), 0.0f);
  const at::Tensor r = (*calls)[1].example;
  EXPECT_GT(r.abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE((r.ge(0) & r.lt(1)).all().item<bool>());  // uniform [0, 1)
  // A GPU instance with graphs still records every bucket after the samples, on the first
  // sample's example (a model may refuse the task's zeros).
  auto graphed = CallsFor(Spec(InstanceSpec::Kind::kGpu, true, 4), {noise, zeros}, *task);
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  EXPECT_EQ(Pairs(*graphed), (Calls{{2, 3}, {4, 1}, {1, 3}, {2, 3}, {4, 3}}));
  for (size_t i = 2; i < graphed->size(); ++i) {
    EXPECT_TRUE((*graphed)[i].example.equal((*graphed)[0].example)) << i;
  }
}

TEST(WarmUpCallsTest, AnySizeInputsTakeTheSamplesDimsWithinABound) {
  ModelConfig config;
  config.set_task("image_classification");
  for (int64_t d : {3, 8, 8}) config.mutable_input()->add_shape(d);
  config.mutable_input()->set_any_size(true);
  for (const char* l : {"a", "b", "c"}) config.add_labels(l);
  config.add_outputs("logits");
  auto task = CreateTask(config, TaskOptions()).value();
  const InstanceSpec cpu = Spec(InstanceSpec::Kind::kCpu, false, 8);
  auto calls =
      CallsFor(cpu, {Sample("big", 2, 1, "input", ::inference::TYPE_FP32, {3, 40, 24})}, *task);
  ASSERT_TRUE(calls.ok()) << calls.status();
  EXPECT_EQ((*calls)[0].example.sizes().vec(), (std::vector<int64_t>{3, 40, 24}));
  // Products that would overflow, or a batch over 2^26 elements, are refused, not allocated.
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{3, int64_t{1} << 62, 1}, std::vector<int64_t>{3, 4096, 4096}}) {
    auto refused = CallsFor(cpu, {Sample("huge", 8, 1, "input", ::inference::TYPE_FP32, dims)},
                               *task);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("in a batch of 8"), std::string::npos)
        << refused.status();
  }
}

TEST(WarmUpCallsTest, ASampleThatDoesNotFitTheModelsInputIsRefusedWithWhy) {
  auto task = Classifier();
  const InstanceSpec cpu = Spec(InstanceSpec::Kind::kCpu, false, 8);
  struct Case {
    ::inference::ModelWarmup sample;
    std::string says;
  };
  const std::vector<Case> cases = {
      {Sample("a", 1, 1, "image", ::inference::TYPE_FP32, {1, 3, 2}),
       "model_warmup 'a': the model's input is 'input', not 'image'"},
      {Sample("b", 1, 1, "input", ::inference::TYPE_UINT8, {1, 3, 2}),
       "input 'input' is TYPE_FP32, not TYPE_UINT8"},
      {Sample("c", 1, 1, "input", ::inference::TYPE_FP32, {1, 2, 3}),
       "model_warmup 'c': dims [1,2,3] do not fit input 'input' [1,3,2]"},
      {Sample("d", 1, 1, "input", ::inference::TYPE_FP32, {3, 2}), "dims [3,2] do not fit"},
      {Sample("e", 1, 1, "input", ::inference::TYPE_FP32, {1, 0, 2}), "dims [1,0,2] do not fit"},
  };
  for (const Case& c : cases) {
    auto calls = CallsFor(cpu, {c.sample}, *task);
    ASSERT_EQ(calls.status().code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_NE(calls.status().message().find(c.says), std::string::npos) << calls.status();
  }
}

::inference::ModelWarmup FileSample(const std::string& file, std::vector<int64_t> dims) {
  ::inference::ModelWarmup w = Sample("f", 2, 1, "input", ::inference::TYPE_FP32, dims);
  (*w.mutable_inputs())["input"].set_input_data_file(file);
  return w;
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

TEST(WarmUpCallsTest, ASampleFilesFirstBytesAreItsExample) {
  auto task = Classifier();
  std::vector<std::pair<std::string, size_t>> asked;
  const WarmUpFileReader files = [&](const std::string& file,
                                     size_t max_bytes) -> absl::StatusOr<std::string> {
    asked.emplace_back(file, max_bytes);
    std::string bytes;
    if (file == "six.bin") bytes = FloatBytes({1, 2, 3, 4, 5, 6});
    if (file == "seven.bin") bytes = FloatBytes({6, 5, 4, 3, 2, 1, 99});
    if (file == "five.bin") bytes = FloatBytes({1, 2, 3, 4, 5});
    if (bytes.empty()) return absl::NotFoundError(absl::StrCat("'m/warmup/", file, "' does not exist"));
    return bytes.substr(0, max_bytes);
  };
  auto calls = SampleWarmUpCalls(
      {FileSample("six.bin", {1, 3, 2}), FileSample("seven.bin", {1, 3, 2})}, *task, files);
  ASSERT_TRUE(calls.ok()) << calls.status();
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].batch, 2);
  // Row-major FP32 of the sample's dims; a longer file's first bytes (Triton's rule).
  EXPECT_TRUE((*calls)[0].example.equal(at::arange(1, 7, at::kFloat).reshape({1, 3, 2})));
  EXPECT_TRUE((*calls)[1].example.equal(at::arange(6, 0, -1, at::kFloat).reshape({1, 3, 2})));
  // Only one example's bytes are asked for (6 floats).
  using Asked = std::vector<std::pair<std::string, size_t>>;
  EXPECT_EQ(asked, (Asked{{"six.bin", 24}, {"seven.bin", 24}}));

  auto shorter = SampleWarmUpCalls({FileSample("five.bin", {1, 3, 2})}, *task, files);
  EXPECT_EQ(shorter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shorter.status().message().find(
                "model_warmup 'f': input_data_file 'five.bin' holds 20 bytes; dims [1,3,2] of "
                "FP32 need 24"),
            std::string::npos)
      << shorter.status();
  // The reader's failure, with the sample named.
  auto absent = SampleWarmUpCalls({FileSample("none.bin", {1, 3, 2})}, *task, files);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(absent.status().message(), "model_warmup 'f': 'm/warmup/none.bin' does not exist");
  // The dims are checked before anything is read.
  asked.clear();
  EXPECT_EQ(SampleWarmUpCalls({FileSample("six.bin", {3, 2})}, *task, files).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(asked.empty());
  // Without a reader (no warmup directory to read from), a file sample cannot run.
  EXPECT_EQ(SampleWarmUpCalls({FileSample("six.bin", {1, 3, 2})}, *task).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(WarmUpTest, RunsEachCallOnGatheredZeroExamplesOfTheModelsSize) {
  auto task = Classifier();
  auto example = task->WarmUpExample();
  ASSERT_TRUE(example.ok()) << example.status();
  EXPECT_EQ(example->sizes().vec(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(example->scalar_type(), at::kFloat);
  EXPECT_EQ(example->abs().sum().item<float>(), 0.0f);

  FakeRunner runner;
  ASSERT_TRUE(WarmUp(runner, *task, {{1, 2, {}}, {4, 3, {}}}).ok());
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{1, 1, 4, 4, 4}));
}

TEST(WarmUpTest, ACallsOwnExampleIsWhatRuns) {
  auto task = Classifier();
  FakeRunner runner;  // logits = sum of the example times [1, 2, 3]
  ASSERT_TRUE(WarmUp(runner, *task, {{3, 1, at::ones({1, 3, 2})}}).ok());
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{3}));
  runner.RejectExamplesAbove(5.0f);  // the ones sum to 6: the model refuses them
  EXPECT_EQ(WarmUp(runner, *task, {{1, 1, at::ones({1, 3, 2})}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(WarmUp(runner, *task, {{1, 1, {}}}).ok());  // the task's zeros pass
}

TEST(WarmUpTest, StopsAtTheFirstFailureAndSaysWhere) {
  auto task = Classifier();
  FakeRunner runner;
  runner.FailWith(absl::InternalError("model broke"));
  const absl::Status st = WarmUp(runner, *task, {{2, 2, {}}, {4, 3, {}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("warm-up forward at batch 2: model broke"), std::string::npos)
      << st;
  EXPECT_EQ(runner.batch_sizes(), (std::vector<int64_t>{2}));
}

// An assembly without a warm-up example: nothing runs.
class NoExample : public BatchAssembly {
 public:
  absl::StatusOr<std::vector<GatheredBatch>> Gather(const std::vector<at::Tensor>&,
                                                    const CallShapes&) const override {
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
  EXPECT_EQ(WarmUp(runner, assembly, {{1, 2, {}}}).code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(runner.batch_sizes().empty());
}

}  // namespace
}  // namespace gatescope
