#include "server/explain/dense_maps.h"

#include <ATen/core/Tensor.h>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

constexpr int64_t kFloatBytes = 4;
// The contract's finest stage grid is the input's size divided by this.
constexpr int64_t kFinestStride = 4;

}  // namespace

absl::StatusOr<std::unique_ptr<DenseMapCollector>> DenseMapCollector::Create(
    const DenseMapLayout& layout, const DenseMapOptions& options, int64_t max_bytes) {
  if (layout.stages <= 0 || !layout.has_attention) {
    return absl::InvalidArgumentError(
        "model cannot explain (its metadata declares no decoder stages or attention maps)");
  }
  if (options.gates && !layout.has_gate) {
    return absl::InvalidArgumentError("model has no gate maps");
  }
  return std::unique_ptr<DenseMapCollector>(new DenseMapCollector(layout, options, max_bytes));
}

int64_t DenseMapCollector::PeakBytes(ImageSize) const {
  const int64_t h = (layout_.height + kFinestStride - 1) / kFinestStride;
  const int64_t w = (layout_.width + kFinestStride - 1) / kFinestStride;
  const int64_t map = h * w * kFloatBytes;
  const int64_t returned = 1 + (layout_.has_gate ? 1 : 0);
  const int64_t kept = (options_.gates ? 1 : 0) + (options_.query_attention ? 1 : 0);
  return returned * map + kept * layout_.stages * map;
}

absl::Status DenseMapCollector::KeepMap(const NamedTensors& maps, const char* kind,
                                        std::vector<at::Tensor>& into) {
  auto it = maps.find(kind);
  if (it == maps.end()) {
    return absl::InternalError(absl::StrCat("model returned no '", kind, "' map"));
  }
  if (it->second.dim() != 2) {
    return absl::InternalError(absl::StrCat("model's '", kind, "' map has ", it->second.dim(),
                                            " dims, the segmentation contract says [h, w]"));
  }
  auto owned = Keep(it->second);
  if (!owned.ok()) return owned.status();
  into.push_back(*std::move(owned));
  return absl::OkStatus();
}

absl::Status DenseMapCollector::Collect(int, const NamedTensors& maps) {
  if (options_.gates) {
    if (absl::Status st = KeepMap(maps, "gate", out_.gates); !st.ok()) return st;
  }
  if (options_.query_attention) {
    if (absl::Status st = KeepMap(maps, "attention", out_.query_attention); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<DenseMaps> DenseMapCollector::Finish() {
  if (absl::Status st = CheckComplete(); !st.ok()) return st;
  return std::move(out_);
}

}  // namespace gatescope
