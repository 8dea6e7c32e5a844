// The model execution seam. Batching, repository and frontends see models only through
// ModelRunner, so tests substitute a fake and no code outside runtime/ touches TorchScript.
#pragma once

#include <string>
#include <unordered_map>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace gatescope {

using NamedTensors = std::unordered_map<std::string, at::Tensor>;

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Runs the model's forward on `batch` ([B, ...], B >= 1) and returns its named outputs,
  // each with leading dim B. Blocks the calling thread for the whole computation.
  // Not thread-safe: each runner is driven by exactly one worker thread.
  virtual absl::StatusOr<NamedTensors> Predict(const at::Tensor& batch) = 0;

  // Runs the model's explain() on `batch` and returns its per-layer maps flattened to
  // "<kind>.<layer>" (e.g. "attention.0" [B,H,N,N], "gate.3" [B,H,N]) plus its other
  // entries under their own names. Same blocking and threading contract as Predict.
  // UNIMPLEMENTED when the model cannot explain.
  virtual absl::StatusOr<NamedTensors> Explain(const at::Tensor& batch) {
    (void)batch;
    return absl::UnimplementedError("this model cannot explain");
  }
};

}  // namespace gatescope
