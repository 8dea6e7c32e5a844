// Attention rollout (Abnar & Zuidema) over per-layer maps; same definition as the Python
// reference models/gatescope/explain.py. Pure ATen, thread-safe.
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

// `layers` are one example's per-layer maps [H, N, N]. Returns the [N, N] rollout in
// float64. INVALID_ARGUMENT for bad options or inconsistent shapes.
absl::StatusOr<at::Tensor> AttentionRollout(const std::vector<at::Tensor>& layers,
                                            const RolloutOptions& options);

}  // namespace gatescope
