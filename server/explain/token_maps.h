// Collects one example's explanation from a token model's (ViT-style classifier's) maps,
// one layer at a time, so that an explain request holds at most one layer's full maps
// beyond what it returns: rollout, gate, resonance and PLuG gate maps, and per-layer
// attention maps. Pure ATen; one collector per request, used from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/explain/map_collector.h"
#include "server/explain/rollout.h"
#include "server/runtime/named_tensors.h"

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

struct TokenMaps {
  at::Tensor rollout;                          // [grid_h, grid_w] float32, if asked
  std::vector<at::Tensor> gates;               // per layer [H, grid_h, grid_w]
  std::vector<at::Tensor> resonance;           // per layer [H, grid_h, grid_w] (class row)
  at::Tensor vigilance;                        // [L, H] Pr[c > rho], with resonance
  std::vector<at::Tensor> attention;           // per requested layer [heads, queries, N]
  std::vector<at::Tensor> attention_resonance; // same, of the resonance maps
  std::vector<at::Tensor> plug_gates;          // per layer [queries, N]: PLuG gate rows
};

class TokenMapCollector final : public MapCollector {
 public:
  // INVALID_ARGUMENT when the model cannot serve the options: no maps, gates or resonance
  // it lacks, an attention layer out of range, bad rollout options.
  static absl::StatusOr<std::unique_ptr<TokenMapCollector>> Create(const MapLayout& layout,
                                                                   const ExplainOptions& options,
                                                                   int64_t max_bytes);

  // The explanation, after every layer was added.
  absl::StatusOr<TokenMaps> Finish();

  // Documented in docs/explain.md: one layer's maps as the model returns them plus that
  // layer's transient softmax intermediates, the rollout state, and everything returned.
  // The model's input size is fixed, so `input` is not used.
  int64_t PeakBytes(ImageSize input) const override;

 protected:
  // Layer `layer`'s maps: "attention" [H,N,N] and, as the model has them, "gate" [H,N],
  // "resonance" [H,N,N], "vigilance" [H], "plug_gate" [N,N].
  absl::Status Collect(int layer, const NamedTensors& maps) override;
  const char* Advice() const override { return "; ask for fewer attention layers"; }

 private:
  TokenMapCollector(const MapLayout& layout, const ExplainOptions& options, int64_t max_bytes);
  absl::StatusOr<at::Tensor> Map(const NamedTensors& maps, const std::string& kind,
                                 std::vector<int64_t> shape) const;
  bool WantsFull(int layer) const;
  at::Tensor Selected(const at::Tensor& maps) const;  // [H, N, N] -> [heads, queries, N]
  // Keep(t) appended to `into`.
  absl::Status KeepInto(std::vector<at::Tensor>& into, const at::Tensor& t);

  MapLayout layout_;
  ExplainOptions options_;
  RolloutAccumulator rollout_;
  std::vector<at::Tensor> vigilance_rows_;
  TokenMaps out_;
};

// An explanation as named tensors, for APIs that return outputs by name (KServe):
// "rollout" [gh, gw], "gates" [L, H, gh, gw], "resonance" [L, H, gh, gw], "vigilance"
// [L, H], "attention" and "attention_resonance" [layers asked, H, N, N], "plug_gates"
// [L, queries, N]; absent if not asked.
NamedTensors TokenMapTensors(const TokenMaps& maps);

// The names TokenMapTensors can produce.
bool IsTokenMapOutput(const std::string& name);

}  // namespace gatescope
