// Turns one example's explain() outputs into the explanations a client asked for.
// Pure ATen, thread-safe.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/explain/rollout.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

struct ExplainOptions {
  bool rollout = false;
  RolloutOptions rollout_options;
  bool gates = false;
  std::vector<int> attention_layers;
  int grid_h = 0, grid_w = 0;  // patch grid; tokens are [class token, grid row-major]
};

struct Explanation {
  at::Tensor rollout;                  // [grid_h, grid_w] float32, if asked
  std::vector<at::Tensor> gates;       // per layer [H, grid_h, grid_w]
  std::vector<at::Tensor> attention;   // per requested layer [H, N, N]
};

// `maps` holds "attention.<l>" [H,N,N] and optionally "gate.<l>" [H,N] for l = 0.. .
// INVALID_ARGUMENT when the maps cannot serve the options (no gates, unknown layer, a
// token count that does not match the grid, bad rollout options).
absl::StatusOr<Explanation> BuildExplanation(const NamedTensors& maps,
                                             const ExplainOptions& options);

// The number of consecutive "<kind>.<l>" entries in `maps`.
int CountLayers(const NamedTensors& maps, const std::string& kind);

}  // namespace gatescope
