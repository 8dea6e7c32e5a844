// Attention rollout (Abnar & Zuidema) over per-layer maps; same definition as the Python
// reference models/gatescope/explain.py. Pure ATen, thread-compatible (one accumulator
// per request).
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace gatescope {

struct RolloutOptions {
  std::string head_fusion = "mean";  // mean | max | min
  // How signed maps (M-DGSA's g*A+ - (1-g)*A-) are read: raw | clamp | abs. Default clamp:
  // inhibitory (negative) weight is dropped, so rows stay non-negative.
  std::string signed_maps = "clamp";
  double discard_ratio = 0.0;  // in [0, 1): smallest weights per row zeroed (not column 0)
  int start_layer = 0;
};

// INVALID_ARGUMENT unless the options are valid for a model with `layers` layers.
absl::Status CheckRolloutOptions(const RolloutOptions& options, int layers);

// Folds one layer's maps at a time, so a caller holds one layer's maps plus the [N, N]
// float64 product (16 N^2 bytes with its scratch), never every layer at once.
class RolloutAccumulator {
 public:
  explicit RolloutAccumulator(RolloutOptions options) : options_(std::move(options)) {}

  // Layer `layer`'s maps [H, N, N]; layers must arrive in order 0, 1, ... Layers before
  // start_layer are skipped. INVALID_ARGUMENT for bad options or inconsistent shapes.
  absl::Status Add(int layer, const at::Tensor& maps);

  // The [N, N] rollout in float64 (identity when no layer was folded).
  const at::Tensor& result() const { return result_; }

 private:
  RolloutOptions options_;
  at::Tensor result_;
};

// `layers` are one example's per-layer maps [H, N, N]. Returns the [N, N] rollout in
// float64. INVALID_ARGUMENT for bad options or inconsistent shapes.
absl::StatusOr<at::Tensor> AttentionRollout(const std::vector<at::Tensor>& layers,
                                            const RolloutOptions& options);

}  // namespace gatescope
