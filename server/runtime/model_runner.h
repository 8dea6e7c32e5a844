// The model execution seam. Batching, repository and frontends see models only through
// ModelRunner, so tests substitute a fake and no code outside runtime/ touches TorchScript.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace gatescope {

using NamedTensors = std::unordered_map<std::string, at::Tensor>;

// Receives one layer's maps (batch dim kept) during Explain; the maps are released when it
// returns. A non-OK status stops the explanation with that status.
using LayerMapsVisitor = std::function<absl::Status(int layer, const NamedTensors& maps)>;

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Runs the model's forward on `batch` ([B, ...], B >= 1) and returns its named outputs,
  // each with leading dim B. Blocks the calling thread for the whole computation.
  // Not thread-safe: each runner is driven by exactly one worker thread.
  virtual absl::StatusOr<NamedTensors> Predict(const at::Tensor& batch) = 0;

  // Runs the model's explanation pass on `batch` one layer at a time: for each layer
  // 0..layers-1, calls visit(layer, maps) with that layer's maps keyed by kind (e.g.
  // "attention" [B,H,N,N], "gate" [B,H,N]; segmentation: [B,h_s,w_s] per decoder stage)
  // before computing the next layer, so at most one layer's maps exist at once. `args` go
  // to the pass's start after the input when not empty (segmentation: the query point
  // [qy, qx]); classifiers get none. Returns the pass's final outputs ("logits"). Same
  // blocking and threading contract as Predict. UNIMPLEMENTED when the model cannot explain.
  virtual absl::StatusOr<NamedTensors> Explain(const at::Tensor& batch, int layers,
                                               const std::vector<double>& args,
                                               const LayerMapsVisitor& visit) {
    (void)batch;
    (void)layers;
    (void)args;
    (void)visit;
    return absl::UnimplementedError("this model cannot explain");
  }
};

}  // namespace gatescope
