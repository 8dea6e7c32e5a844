// How a task turns its requests' examples into model calls and back (Triton's backend
// gather and scatter): grouping examples that may share a call, building the call's
// inputs (stacking, padding variable-length inputs) and slicing each request's outputs.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

// One model call: which examples it carries (indices into Gather's argument, in batch
// order) and its inputs.
struct GatheredBatch {
  std::vector<size_t> members;
  ModelInputs inputs;
};

// How the instance that runs a gather's calls wants their inputs shaped.
struct CallShapes {
  // Pad variable-length inputs to the full length of their length bucket (text: 16, 32,
  // 64, ... pieces, at most the longest the model reads), not to the call's longest
  // example, so that calls repeat a few input shapes: a GPU instance that records a CUDA
  // graph per input shape (ModelRunner::RecordsCudaGraphs) then replays a few graphs
  // instead of recording one for every length requests bring.
  bool whole_length_buckets = false;
};

// Row `position` of every output (the batch dim removed): the scatter of tasks whose
// outputs lead with the batch dimension.
inline NamedTensors RowOf(const NamedTensors& outputs, int64_t position) {
  NamedTensors one;
  for (const auto& [name, tensor] : outputs) one.emplace(name, tensor[position]);
  return one;
}

class BatchAssembly {
 public:
  virtual ~BatchAssembly() = default;
  // Partitions `examples` (each without batch dim) into model calls; every example lands
  // in exactly one. A call's inputs may alias its examples (a batch of one may be a view):
  // the caller keeps the examples alive until the call has run, and reads an example
  // again only for a call it gathers anew. `shapes`: the running instance's wishes (tasks
  // of fixed-size inputs have nothing to pad and ignore them). Worker thread; CPU-bound.
  virtual absl::StatusOr<std::vector<GatheredBatch>> Gather(
      const std::vector<at::Tensor>& examples, const CallShapes& shapes) const = 0;
  // The outputs of the example at `position` of its call (batch dim removed), e.g. trimmed
  // back to its own length. `example` is what Gather received for it.
  virtual absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t position,
                                               const at::Tensor& example) const = 0;
  // An example as this task's jobs prepare them, of the model's own input size and with
  // neutral content (all zero pixels; text: max_tokens pad ids), for warming an instance up
  // before it serves (instance_warm_up.h). UNIMPLEMENTED when the task has none.
  virtual absl::StatusOr<at::Tensor> WarmUpExample() const {
    return absl::UnimplementedError("this task has no warm-up example");
  }
  // The example a request of this one `text` prepares (a text task tokenizes it as it
  // tokenizes requests), for a warm-up sample that gives its text. INVALID_ARGUMENT for a
  // text requests could not send; UNIMPLEMENTED when the task takes no text.
  virtual absl::StatusOr<at::Tensor> TextWarmUpExample(std::string_view /*text*/) const {
    return absl::UnimplementedError("this task takes no text");
  }
  // The lengths Gather pads a variable-length input to under `shapes`, ascending, when
  // that is a fixed set (a text task with whole_length_buckets); empty when calls take
  // their examples' sizes. Warm-up runs each, so that their CUDA graphs are recorded
  // before the model serves.
  virtual std::vector<int64_t> PaddedLengths(const CallShapes& /*shapes*/) const { return {}; }
};

}  // namespace gatescope
