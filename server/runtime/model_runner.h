// The model execution seam. Tasks, batching, repository and frontends see models only
// through ModelRunner, so tests substitute a fake and no code outside runtime/ touches
// TorchScript or a device.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

// One model instance on one device. Contract of every call:
// - inputs are CPU tensors; on a GPU the runner copies them in through pinned staging
//   memory and runs the whole call on the instance's own CUDA stream;
// - outputs (and explain maps) come back as CPU tensors, each leading with the batch
//   dimension B;
// - the call blocks its thread for the whole computation; a runner is not thread-safe
//   and is driven by exactly one worker thread;
// - errors: INVALID_ARGUMENT when the model rejects its input (TorchScript
//   `raise ValueError(...)`), INTERNAL for every other failure inside the model (the task
//   has checked the inputs against the metadata before they get here).
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Runs forward(inputs...) and returns its named outputs.
  virtual absl::StatusOr<NamedTensors> Predict(const ModelInputs& inputs) = 0;

  // Whether Predict may replay CUDA graphs recorded per input shape (Device::
  // records_cuda_graphs), so that calls of few distinct shapes pay off. May turn false
  // while the runner serves (a failed recording), never back. Any thread.
  virtual bool RecordsCudaGraphs() const { return false; }

  // Runs the model's explanation pass one layer at a time: for each layer 0..layers-1,
  // calls visit(layer, maps) with that layer's maps keyed by kind (e.g. "attention"
  // [B,H,N,N], "gate" [B,H,N]) before computing the next layer, so at most one layer's
  // maps exist at once. `args` go to the pass's start after the inputs when not empty
  // (segmentation: the query point [qy, qx]). Returns the pass's final outputs
  // ("logits"). UNIMPLEMENTED when the model cannot explain.
  virtual absl::StatusOr<NamedTensors> Explain(const ModelInputs& inputs, int layers,
                                               const std::vector<double>& args,
                                               const LayerMapsVisitor& visit) {
    (void)inputs;
    (void)layers;
    (void)args;
    (void)visit;
    return absl::UnimplementedError("this model cannot explain");
  }
};

}  // namespace gatescope
