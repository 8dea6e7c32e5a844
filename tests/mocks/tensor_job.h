// An InferenceJob for tests: its example is a given tensor (or an error, or a throw), it
// may carry an explanation pass, and how it finished is recorded in Results.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>

#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/tasks/inference_job.h"

namespace gatescope::testing {

// Each job's outputs or error, by index. Thread-safe.
struct Results {
  absl::Mutex mu;
  std::vector<absl::StatusOr<NamedTensors>> by_index ABSL_GUARDED_BY(mu);
  std::vector<std::thread::id> finished_on ABSL_GUARDED_BY(mu);  // the thread of each Finish
  int finished ABSL_GUARDED_BY(mu) = 0;

  explicit Results(int n) : by_index(n, absl::UnknownError("not finished")), finished_on(n) {}
  void Await(int n) {
    absl::MutexLock l(&mu);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return finished >= n; };
    mu.Await(absl::Condition(&done));
  }
};

class TensorJob : public InferenceJob {
 public:
  using Make = std::function<absl::StatusOr<at::Tensor>()>;
  TensorJob(int index, Results* results, Make make)
      : index_(index), results_(results), make_(std::move(make)) {}
  // A job whose example is `value` filled into [2, 2].
  static std::unique_ptr<TensorJob> Filled(int index, Results* results, float value) {
    return std::make_unique<TensorJob>(index, results, [value] { return at::full({2, 2}, value); });
  }

  // Makes this an explanation job over `layers` layers whose start arguments come from
  // `args` (called after Prepare); each layer's maps are appended to `layers_seen`.
  void ExplainWith(int layers, std::function<absl::StatusOr<std::vector<double>>()> args,
                   std::vector<int>* layers_seen) {
    explain_layers_ = layers;
    args_ = std::move(args);
    layers_seen_ = layers_seen;
  }

  bool explains() const override { return explain_layers_ > 0; }
  absl::StatusOr<at::Tensor> Prepare() override {
    prepared_ = true;
    return make_();
  }
  absl::StatusOr<ExplainPass> BeginExplain() override {
    if (!prepared_) return absl::InternalError("BeginExplain before Prepare");
    ExplainPass pass;
    pass.layers = explain_layers_;
    if (args_) {
      auto args = args_();
      if (!args.ok()) return args.status();
      pass.args = *args;
    }
    pass.visit = [seen = layers_seen_](int layer, const NamedTensors& maps) {
      if (maps.at("layer").dim() != 0) return absl::InternalError("batch dim not removed");
      seen->push_back(layer);
      return absl::OkStatus();
    };
    return pass;
  }
  void Finish(absl::StatusOr<NamedTensors> outputs) override {
    absl::MutexLock l(&results_->mu);
    results_->by_index[index_] = std::move(outputs);
    results_->finished_on[index_] = std::this_thread::get_id();
    ++results_->finished;
  }

 private:
  const int index_;
  Results* const results_;
  const Make make_;
  bool prepared_ = false;
  int explain_layers_ = 0;
  std::function<absl::StatusOr<std::vector<double>>()> args_;
  std::vector<int>* layers_seen_ = nullptr;
};

}  // namespace gatescope::testing
