// Builds one example's explanation from its model's maps, one layer at a time, so that
// an explain request holds at most one layer's full maps beyond what it returns.
// Pure ATen; one builder per request, used from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/explain/rollout.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

// What a model's metadata declares about its maps. Tokens are [class token, patch grid
// row-major], so N = grid_h * grid_w + 1.
struct MapLayout {
  int layers = 0, heads = 0;
  int grid_h = 0, grid_w = 0;
  bool has_gate = false, has_resonance = false;
  bool has_plug_gate = false;  // PLuG: head-shared gate G [N, N] per layer
  int64_t tokens() const { return static_cast<int64_t>(grid_h) * grid_w + 1; }
  int64_t patches() const { return static_cast<int64_t>(grid_h) * grid_w; }
};

struct ExplainOptions {
  bool rollout = false;
  RolloutOptions rollout_options;
  bool gates = false;
  bool resonance = false;
  bool plug_gates = false;            // PLuG gate rows G[queries, N] per layer
  std::vector<int> attention_layers;  // [heads, queries, N] maps of these layers
  std::vector<int> attention_heads;   // restrict those maps to these heads (empty: all)
  std::vector<int> attention_queries; // ... and these query tokens (empty: all)
};

struct Explanation {
  at::Tensor rollout;                          // [grid_h, grid_w] float32, if asked
  std::vector<at::Tensor> gates;               // per layer [H, grid_h, grid_w]
  std::vector<at::Tensor> resonance;           // per layer [H, grid_h, grid_w] (class row)
  at::Tensor vigilance;                        // [L, H] Pr[c > rho], with resonance
  std::vector<at::Tensor> attention;           // per requested layer [heads, queries, N]
  std::vector<at::Tensor> attention_resonance; // same, of the resonance maps
  std::vector<at::Tensor> plug_gates;          // per layer [queries, N]: PLuG gate rows
};

class ExplanationBuilder {
 public:
  // INVALID_ARGUMENT when the model cannot serve the options: no maps, gates or resonance
  // it lacks, an attention layer out of range, bad rollout options.
  static absl::StatusOr<std::unique_ptr<ExplanationBuilder>> Create(const MapLayout& layout,
                                                                    const ExplainOptions& options);

  // Upper bound of the bytes this request holds at once (documented in docs/explain.md):
  // one layer's maps as the model returns them plus that layer's transient softmax
  // intermediates, the rollout state, and everything returned.
  int64_t PeakBytes() const;

  // Layer `layer`'s maps of one example (batch dim removed): "attention" [H,N,N] and, as
  // the model has them, "gate" [H,N], "resonance" [H,N,N], "vigilance" [H], "plug_gate"
  // [N,N]. Layers must
  // arrive in order 0..L-1. INTERNAL when the maps contradict the model's metadata.
  absl::Status AddLayer(int layer, const NamedTensors& maps);

  // After every layer was added.
  absl::StatusOr<Explanation> Finish();

 private:
  ExplanationBuilder(const MapLayout& layout, const ExplainOptions& options);
  absl::StatusOr<at::Tensor> Map(const NamedTensors& maps, const std::string& kind,
                                 std::vector<int64_t> shape) const;
  bool WantsFull(int layer) const;
  at::Tensor Selected(const at::Tensor& maps) const;  // [H, N, N] -> [heads, queries, N]

  MapLayout layout_;
  ExplainOptions options_;
  RolloutAccumulator rollout_;
  int next_layer_ = 0;
  std::vector<at::Tensor> vigilance_rows_;
  Explanation out_;
};

}  // namespace gatescope
