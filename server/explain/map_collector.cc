#include "server/explain/map_collector.h"

#include <ATen/core/Tensor.h>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::Status MapCollector::CheckBudget(ImageSize input) const {
  const int64_t bytes = PeakBytes(input);
  if (bytes <= max_bytes_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("explanation would hold ", bytes,
                                                   " bytes, over the server's cap of ",
                                                   max_bytes_, " (--explain_max_bytes)",
                                                   Advice()));
}

absl::Status MapCollector::AddLayer(int layer, const NamedTensors& maps) {
  if (layer != next_layer_ || layer >= layers_) {
    return absl::InternalError(absl::StrCat("explain layer ", layer, " out of order"));
  }
  ++next_layer_;
  return Collect(layer, maps);
}

absl::Status MapCollector::Charge(int64_t bytes) {
  kept_bytes_ += bytes;
  if (kept_bytes_ <= max_bytes_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "explanation maps passed the server's cap of ", max_bytes_, " bytes (--explain_max_bytes)",
      Advice()));
}

absl::StatusOr<at::Tensor> MapCollector::Keep(const at::Tensor& t) {
  at::Tensor owned = t.to(at::kFloat).contiguous().clone();
  if (absl::Status st = Charge(static_cast<int64_t>(owned.nbytes())); !st.ok()) return st;
  return owned;
}

absl::Status MapCollector::CheckComplete() const {
  if (next_layer_ == layers_) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("explain stopped after ", next_layer_, " of ", layers_, " layers"));
}

}  // namespace gatescope
