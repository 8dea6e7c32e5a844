// What every explanation collector shares: the model's maps arrive one layer at a time,
// in order, and one byte budget (--explain_max_bytes) bounds what a request holds. The
// budget is checked up front, before the model's pass runs, against the collector's own
// upper bound (PeakBytes), and again on every map it keeps. Pure ATen; one collector per
// request, used from one thread at a time.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/common/image_size.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

class MapCollector {
 public:
  virtual ~MapCollector() = default;

  // Layers (or stages) of the pass.
  int layers() const { return layers_; }

  // An upper bound of the bytes the request holds at once for an input of `input`'s size:
  // one layer's maps as the model returns them (and its transient intermediates), what
  // the collector keeps, and what it returns. Models of one input size ignore `input`.
  virtual int64_t PeakBytes(ImageSize input) const = 0;

  // RESOURCE_EXHAUSTED ("... over the server's cap of <max_bytes> ...") when
  // PeakBytes(input) exceeds the budget. Called before the pass starts; also on the gRPC
  // thread with the model's own input size, to refuse early.
  absl::Status CheckBudget(ImageSize input) const;

  // Layer `layer`'s maps of one example (batch dim removed). INTERNAL out of order or for
  // maps that contradict the model's metadata; RESOURCE_EXHAUSTED when the kept maps pass
  // the budget.
  absl::Status AddLayer(int layer, const NamedTensors& maps);

 protected:
  MapCollector(int layers, int64_t max_bytes) : layers_(layers), max_bytes_(max_bytes) {}

  // Takes layer `layer`'s maps (in order, in range).
  virtual absl::Status Collect(int layer, const NamedTensors& maps) = 0;
  // What to ask for instead, appended to the budget error (e.g. "ask for fewer layers").
  virtual const char* Advice() const { return ""; }

  // `t` as an owned, contiguous float32 copy, counted against the budget.
  absl::StatusOr<at::Tensor> Keep(const at::Tensor& t);
  // Counts `bytes` more as kept.
  absl::Status Charge(int64_t bytes);
  // INTERNAL unless every layer has arrived.
  absl::Status CheckComplete() const;

  int64_t max_bytes() const { return max_bytes_; }

 private:
  const int layers_;
  const int64_t max_bytes_;
  int next_layer_ = 0;
  int64_t kept_bytes_ = 0;
};

}  // namespace gatescope
