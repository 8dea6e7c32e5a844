// ModelRunner fake: "logits" = per-example sum of the input times [1, 2, ..., classes].
// Records batch sizes and input shapes; can be held closed so tests can build up a queue. Explain visits
// each layer l with {"layer": [B] filled with l} and records the extra arguments.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>

#include <atomic>
#include <limits>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/runtime/model_runner.h"

namespace gatescope::testing {

class FakeRunner : public ModelRunner {
 public:
  explicit FakeRunner(int classes = 3) : classes_(classes) {}

  absl::StatusOr<NamedTensors> Predict(const ModelInputs& inputs) override {
    const at::Tensor& batch = inputs.at(0);
    absl::MutexLock lock(&mu_);
    ++entered_;
    mu_.Await(absl::Condition(&open_));
    batch_sizes_.push_back(batch.size(0));
    input_shapes_.push_back(batch.sizes().vec());
    input_sums_.push_back(batch.sum().item<double>());
    if (!fail_with_.ok()) return fail_with_;
    if ((batch.reshape({batch.size(0), -1}).sum(1) > reject_above_).any().item<bool>()) {
      return absl::InvalidArgumentError("input too large for this model");
    }
    at::Tensor sums = batch.reshape({batch.size(0), -1}).sum(1, /*keepdim=*/true);
    return NamedTensors{{"logits", sums * at::arange(1, classes_ + 1, at::kFloat)}};
  }

  absl::StatusOr<NamedTensors> Explain(const ModelInputs& inputs, int layers,
                                       const std::vector<double>& args,
                                       const LayerMapsVisitor& visit) override {
    const at::Tensor& batch = inputs.at(0);
    {
      absl::MutexLock lock(&mu_);
      explain_args_.push_back(args);
    }
    for (int l = 0; l < layers; ++l) {
      absl::Status st = visit(l, {{"layer", at::full({batch.size(0)}, float(l))}});
      if (!st.ok()) return st;
    }
    return Predict(inputs);
  }

  bool RecordsCudaGraphs() const override { return records_cuda_graphs_.load(); }
  // As a GPU device with CUDA graphs says; false again as after a failed recording.
  void SetRecordsCudaGraphs(bool records) { records_cuda_graphs_.store(records); }

  void Hold() { absl::MutexLock l(&mu_); open_ = false; }
  void Release() { absl::MutexLock l(&mu_); open_ = true; }
  void FailWith(absl::Status s) { absl::MutexLock l(&mu_); fail_with_ = std::move(s); }
  // Calls carrying an example whose sum exceeds `v` fail with INVALID_ARGUMENT, as a model
  // raising ValueError on its input does.
  void RejectExamplesAbove(float v) { absl::MutexLock l(&mu_); reject_above_ = v; }
  // Blocks until Predict has been entered `n` times.
  void AwaitEntered(int n) {
    absl::MutexLock l(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  std::vector<int64_t> batch_sizes() { absl::MutexLock l(&mu_); return batch_sizes_; }
  // Each call's sum over its whole first input, in order.
  std::vector<double> input_sums() { absl::MutexLock l(&mu_); return input_sums_; }
  // Each call's first input's sizes, in order.
  std::vector<std::vector<int64_t>> input_shapes() { absl::MutexLock l(&mu_); return input_shapes_; }
  std::vector<std::vector<double>> explain_args() { absl::MutexLock l(&mu_); return explain_args_; }

 private:
  const int classes_;
  std::atomic<bool> records_cuda_graphs_{false};
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  float reject_above_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<float>::infinity();
  std::vector<double> input_sums_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> batch_sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int64_t>> input_shapes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<double>> explain_args_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope::testing
