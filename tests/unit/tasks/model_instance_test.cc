// One model instance: prepare, gather (the image tasks' stacking by shape), run, scatter.
#include "server/tasks/model_instance.h"

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "server/tasks/task_registry.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_runner.h"
#include "tests/mocks/tensor_job.h"
#include "tests/unit/tasks/task_test_util.h"

namespace gatescope {
namespace {

using testing::FakeClock;
using testing::FakeRunner;
using testing::Results;
using testing::TensorJob;

// A classifier task over [1, 2, 2] inputs: the instance's gather and scatter.
std::unique_ptr<Task> Classifier() { return testing::ImageClassifier({1, 2, 2}); }

class RecordingObserver : public ExecutionObserver {
 public:
  void Executed(int batch_size, absl::Duration, absl::Duration, absl::Duration) override {
    sizes.push_back(batch_size);
  }
  void Outputs(const NamedTensors& outputs) override { rows += outputs.at("logits").size(0); }
  std::vector<int> sizes;
  int64_t rows = 0;
};

class ModelInstanceTest : public ::testing::Test {
 protected:
  ModelInstanceTest() {
    auto runner = std::make_unique<FakeRunner>();
    runner_ = runner.get();
    instance_ = std::make_unique<ModelInstance>(std::move(runner), task_.get(), &clock_, &observer_);
  }
  void Run(std::vector<std::unique_ptr<TensorJob>> jobs) {
    std::vector<std::unique_ptr<Job>> group;
    for (auto& j : jobs) group.push_back(std::move(j));
    instance_->Execute(std::move(group));
  }

  std::unique_ptr<Task> task_ = Classifier();
  FakeClock clock_;
  RecordingObserver observer_;
  FakeRunner* runner_ = nullptr;
  std::unique_ptr<ModelInstance> instance_;
};

TEST_F(ModelInstanceTest, StacksTheGroupAndSlicesEachJobsOutputs) {
  Results results(3);
  std::vector<std::unique_ptr<TensorJob>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(TensorJob::Filled(i, &results, float(i + 1)));
  Run(std::move(jobs));
  EXPECT_EQ(runner_->batch_sizes(), (std::vector<int64_t>{3}));
  EXPECT_EQ(observer_.sizes, (std::vector<int>{3}));
  EXPECT_EQ(observer_.rows, 3);
  absl::MutexLock l(&results.mu);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(results.by_index[i].ok()) << i;
    const at::Tensor logits = results.by_index[i]->at("logits");
    ASSERT_EQ(logits.dim(), 1);
    // The sum of a 2x2 tensor filled with i + 1 is 4 (i + 1); times [1, 2, 3].
    EXPECT_FLOAT_EQ(logits[2].item<float>(), 12.f * (i + 1)) << i;
  }
}

// With a reply pool the predictions finish on its threads, each once with its own outputs,
// and the worker moves on; a pool that refuses (stopped) leaves the replies to the worker.
TEST_F(ModelInstanceTest, PredictionsFinishOnTheReplyPoolWhenGivenOne) {
  PreparationPool replies(2, 16);
  ModelInstance instance(std::make_unique<FakeRunner>(), task_.get(), &clock_, &observer_,
                         &replies);
  auto run = [&instance](Results& results, int n) {
    std::vector<std::unique_ptr<Job>> group;
    for (int i = 0; i < n; ++i) group.push_back(TensorJob::Filled(i, &results, float(i + 1)));
    instance.Execute(std::move(group));
  };
  Results results(4);
  run(results, 4);
  results.Await(4);
  {
    absl::MutexLock l(&results.mu);
    EXPECT_EQ(results.finished, 4);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(results.by_index[i].ok()) << i;
      EXPECT_FLOAT_EQ(results.by_index[i]->at("logits")[2].item<float>(), 12.f * (i + 1)) << i;
      EXPECT_NE(results.finished_on[i], std::this_thread::get_id()) << i;
    }
  }
  replies.Stop();
  Results inline_results(2);
  run(inline_results, 2);
  absl::MutexLock l(&inline_results.mu);
  EXPECT_EQ(inline_results.finished, 2);  // before Execute returned
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(inline_results.by_index[i].ok()) << i;
    EXPECT_EQ(inline_results.finished_on[i], std::this_thread::get_id()) << i;
  }
}

TEST_F(ModelInstanceTest, DifferentShapesRunInSeparateCalls) {
  Results results(3);
  std::vector<std::unique_ptr<TensorJob>> jobs;
  jobs.push_back(TensorJob::Filled(0, &results, 1.f));
  jobs.push_back(std::make_unique<TensorJob>(1, &results, [] { return at::ones({3, 3}); }));
  jobs.push_back(TensorJob::Filled(2, &results, 1.f));
  Run(std::move(jobs));
  EXPECT_EQ(runner_->batch_sizes(), (std::vector<int64_t>{2, 1}));
  absl::MutexLock l(&results.mu);
  EXPECT_FLOAT_EQ(results.by_index[1]->at("logits")[0].item<float>(), 9.f);
  EXPECT_FLOAT_EQ(results.by_index[2]->at("logits")[0].item<float>(), 4.f);
}

TEST_F(ModelInstanceTest, AJobWhoseInputFailsFinishesAloneAndTheOthersRun) {
  Results results(3);
  std::vector<std::unique_ptr<TensorJob>> jobs;
  jobs.push_back(std::make_unique<TensorJob>(0, &results, []() -> absl::StatusOr<at::Tensor> {
    return absl::InvalidArgumentError("undecodable");
  }));
  jobs.push_back(std::make_unique<TensorJob>(1, &results, []() -> absl::StatusOr<at::Tensor> {
    throw std::runtime_error("oops");
  }));
  jobs.push_back(TensorJob::Filled(2, &results, 2.f));
  Run(std::move(jobs));
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.by_index[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(std::string(results.by_index[1].status().message()).find("oops"), std::string::npos);
  ASSERT_TRUE(results.by_index[2].ok());
  EXPECT_FLOAT_EQ(results.by_index[2]->at("logits")[0].item<float>(), 8.f);
  EXPECT_EQ(runner_->batch_sizes(), (std::vector<int64_t>{1}));
}

TEST_F(ModelInstanceTest, ARunnerErrorReachesEveryJobOfTheCall) {
  runner_->FailWith(absl::InternalError("boom"));
  Results results(2);
  std::vector<std::unique_ptr<TensorJob>> jobs;
  for (int i = 0; i < 2; ++i) jobs.push_back(TensorJob::Filled(i, &results, 1.f));
  Run(std::move(jobs));
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.by_index[0].status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(observer_.sizes.empty());  // only successful calls are counted
}

TEST_F(ModelInstanceTest, AnInputTheModelRejectsFailsOnlyItsOwnRequest) {
  runner_->RejectExamplesAbove(10.f);  // examples filled with more than 2.5
  Results results(3);
  std::vector<std::unique_ptr<TensorJob>> jobs;
  jobs.push_back(TensorJob::Filled(0, &results, 1.f));
  jobs.push_back(TensorJob::Filled(1, &results, 3.f));
  jobs.push_back(TensorJob::Filled(2, &results, 2.f));
  Run(std::move(jobs));
  // The batch of three was refused, then each example ran alone.
  EXPECT_EQ(runner_->batch_sizes(), (std::vector<int64_t>{3, 1, 1, 1}));
  absl::MutexLock l(&results.mu);
  EXPECT_TRUE(results.by_index[0].ok());
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(results.by_index[2].ok());
  EXPECT_FLOAT_EQ(results.by_index[2]->at("logits")[0].item<float>(), 8.f);
}

TEST_F(ModelInstanceTest, ExplanationsRunAloneWithArgumentsComputedAfterPrepare) {
  Results results(3);
  std::vector<int> seen0, seen2;
  auto a = TensorJob::Filled(0, &results, 1.f);
  a.get()->ExplainWith(2, nullptr, &seen0);
  auto b = TensorJob::Filled(1, &results, 1.f);
  b.get()->ExplainWith(2, []() -> absl::StatusOr<std::vector<double>> {
    return absl::InvalidArgumentError("query outside the input");
  }, nullptr);
  auto c = TensorJob::Filled(2, &results, 1.f);
  c.get()->ExplainWith(3, []() -> absl::StatusOr<std::vector<double>> {
    return std::vector<double>{0.25, 0.5};
  }, &seen2);
  std::vector<std::unique_ptr<TensorJob>> jobs;
  jobs.push_back(std::move(a));
  jobs.push_back(std::move(b));
  jobs.push_back(std::move(c));
  Run(std::move(jobs));
  EXPECT_EQ(seen0, (std::vector<int>{0, 1}));
  EXPECT_EQ(seen2, (std::vector<int>{0, 1, 2}));
  // Job 0 had no extra arguments; job 1 never ran.
  EXPECT_EQ(runner_->explain_args(), (std::vector<std::vector<double>>{{}, {0.25, 0.5}}));
  EXPECT_EQ(runner_->batch_sizes(), (std::vector<int64_t>{1, 1}));
  absl::MutexLock l(&results.mu);
  EXPECT_TRUE(results.by_index[0].ok());
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(results.by_index[2].ok());
  EXPECT_EQ(results.by_index[2]->at("logits").dim(), 1);  // the batch dim is removed
}

// Gathers like `inner` but loses the last example: a broken task.
class LossyAssembly : public BatchAssembly {
 public:
  explicit LossyAssembly(const BatchAssembly* inner) : inner_(inner) {}
  absl::StatusOr<std::vector<GatheredBatch>> Gather(const std::vector<at::Tensor>& examples,
                                                    const CallShapes& shapes) const override {
    auto batches = inner_->Gather(examples, shapes);
    if (batches.ok() && examples.size() > 1) batches->back().members.pop_back();
    return batches;
  }
  absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t position,
                                       const at::Tensor& example) const override {
    return inner_->Scatter(outputs, position, example);
  }

 private:
  const BatchAssembly* const inner_;
};

TEST_F(ModelInstanceTest, AGatherThatLosesAnExampleFailsEveryJobOnceInsteadOfStrandingOne) {
  LossyAssembly lossy(task_.get());
  ModelInstance instance(std::make_unique<FakeRunner>(), &lossy, &clock_, nullptr);
  Results results(2);
  std::vector<std::unique_ptr<Job>> group;
  group.push_back(TensorJob::Filled(0, &results, 1.f));
  group.push_back(TensorJob::Filled(1, &results, 1.f));
  instance.Execute(std::move(group));
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.finished, 2);
  EXPECT_EQ(results.by_index[0].status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInternal);
}

// Gathers like `inner` and records the shapes each gather was asked for.
class ShapesRecordingAssembly : public BatchAssembly {
 public:
  explicit ShapesRecordingAssembly(const BatchAssembly* inner) : inner_(inner) {}
  absl::StatusOr<std::vector<GatheredBatch>> Gather(const std::vector<at::Tensor>& examples,
                                                    const CallShapes& shapes) const override {
    asked.push_back(shapes.whole_length_buckets);
    return inner_->Gather(examples, shapes);
  }
  absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t position,
                                       const at::Tensor& example) const override {
    return inner_->Scatter(outputs, position, example);
  }
  mutable std::vector<bool> asked;  // the worker's thread only, read after Execute

 private:
  const BatchAssembly* const inner_;
};

TEST_F(ModelInstanceTest, PredictionsAreGatheredWithTheRunnersShapesExplanationsAsTheyAre) {
  ShapesRecordingAssembly recording(task_.get());
  auto runner = std::make_unique<FakeRunner>();
  runner->RejectExamplesAbove(5.0f);
  runner->SetRecordsCudaGraphs(true);
  ModelInstance instance(std::move(runner), &recording, &clock_, nullptr);
  Results results(3);
  std::vector<std::unique_ptr<Job>> group;
  group.push_back(TensorJob::Filled(0, &results, 1.f));
  group.push_back(TensorJob::Filled(1, &results, 2.f));  // sums to 8: refused, then retried alone
  std::vector<int> layers_seen;
  auto explained = TensorJob::Filled(2, &results, 1.f);
  explained.get()->ExplainWith(1, nullptr, &layers_seen);
  group.push_back(std::move(explained));
  instance.Execute(std::move(group));
  // The batch, each of its two examples alone, then the explanation.
  EXPECT_EQ(recording.asked, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(layers_seen, (std::vector<int>{0}));
  absl::MutexLock l(&results.mu);
  EXPECT_TRUE(results.by_index[0].ok());
  EXPECT_EQ(results.by_index[1].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(results.by_index[2].ok());
}

TEST_F(ModelInstanceTest, CallsStopBeingPaddedForGraphsOnceTheRunnerStopsRecordingThem) {
  ShapesRecordingAssembly recording(task_.get());
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* fake = runner.get();
  fake->SetRecordsCudaGraphs(true);
  ModelInstance instance(std::move(runner), &recording, &clock_, nullptr);
  Results results(2);
  std::vector<std::unique_ptr<Job>> first;
  first.push_back(TensorJob::Filled(0, &results, 1.f));
  instance.Execute(std::move(first));
  fake->SetRecordsCudaGraphs(false);  // as a failed recording turns a GPU's graphs off
  std::vector<std::unique_ptr<Job>> second;
  second.push_back(TensorJob::Filled(1, &results, 1.f));
  instance.Execute(std::move(second));
  EXPECT_EQ(recording.asked, (std::vector<bool>{true, false}));
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.finished, 2);
  EXPECT_TRUE(results.by_index[0].ok());
  EXPECT_TRUE(results.by_index[1].ok());
}

TEST_F(ModelInstanceTest, AThrowingObserverDoesNotCostTheRequestsTheirAnswers) {
  struct Throwing : ExecutionObserver {
    void Executed(int, absl::Duration, absl::Duration, absl::Duration) override {}
    void Outputs(const NamedTensors&) override { throw std::runtime_error("statistics broke"); }
  } observer;
  ModelInstance instance(std::make_unique<FakeRunner>(), task_.get(), &clock_, &observer);
  Results results(2);
  std::vector<std::unique_ptr<Job>> group;
  group.push_back(TensorJob::Filled(0, &results, 1.f));
  group.push_back(TensorJob::Filled(1, &results, 2.f));
  instance.Execute(std::move(group));
  absl::MutexLock l(&results.mu);
  EXPECT_EQ(results.finished, 2);
  ASSERT_TRUE(results.by_index[1].ok());
  EXPECT_FLOAT_EQ(results.by_index[1]->at("logits")[0].item<float>(), 8.f);
}

TEST_F(ModelInstanceTest, JobsOtherThanInferenceJobsAreRefused) {
  struct Other : Job {
    absl::Status* got;
    explicit Other(absl::Status* g) : got(g) {}
    void Refuse(absl::Status st) override { *got = st; }
  };
  absl::Status got;
  std::vector<std::unique_ptr<Job>> group;
  group.push_back(std::make_unique<Other>(&got));
  instance_->Execute(std::move(group));
  EXPECT_EQ(got.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(runner_->batch_sizes().empty());
}

}  // namespace
}  // namespace gatescope
