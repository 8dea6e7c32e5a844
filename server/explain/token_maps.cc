#include "server/explain/token_maps.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"

namespace gatescope {
namespace {

constexpr int64_t kFloatBytes = 4, kDoubleBytes = 8;
// Softmax intermediates a layer's explain keeps alive besides the maps it returns (logits
// and branch maps of a two-branch attention).
constexpr int64_t kTransientMapsPerLayer = 3;


}  // namespace

TokenMapCollector::TokenMapCollector(const MapLayout& layout, const ExplainOptions& options,
                                     int64_t max_bytes)
    : MapCollector(layout.layers, max_bytes),
      layout_(layout),
      options_(options),
      rollout_(options.rollout_options) {}

absl::StatusOr<std::unique_ptr<TokenMapCollector>> TokenMapCollector::Create(
    const MapLayout& layout, const ExplainOptions& options, int64_t max_bytes) {
  if (layout.layers <= 0 || layout.heads <= 0 || layout.grid_h <= 0 || layout.grid_w <= 0) {
    return absl::InvalidArgumentError(
        "model cannot explain (its metadata declares no layers, heads or token grid)");
  }
  if (options.gates && !layout.has_gate) {
    return absl::InvalidArgumentError("model has no gate maps");
  }
  if (options.plug_gates && !layout.has_plug_gate) {
    return absl::InvalidArgumentError("model has no PLuG gate maps (not a PLuG model)");
  }
  if (options.resonance && !layout.has_resonance) {
    return absl::InvalidArgumentError("model has no resonance maps (not a DAR model)");
  }
  for (int l : options.attention_layers) {
    if (l < 0 || l >= layout.layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention layer ", l, " out of range 0..", layout.layers - 1));
    }
  }
  for (int h : options.attention_heads) {
    if (h < 0 || h >= layout.heads) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention head ", h, " out of range 0..", layout.heads - 1));
    }
  }
  for (int q : options.attention_queries) {
    if (q < 0 || q >= layout.tokens()) {
      return absl::InvalidArgumentError(
          absl::StrCat("query token ", q, " out of range 0..", layout.tokens() - 1));
    }
  }
  if (options.rollout) {
    if (absl::Status st = CheckRolloutOptions(options.rollout_options, layout.layers); !st.ok()) {
      return st;
    }
  }
  return std::unique_ptr<TokenMapCollector>(new TokenMapCollector(layout, options, max_bytes));
}

int64_t TokenMapCollector::PeakBytes(ImageSize) const {
  const int64_t n = layout_.tokens(), h = layout_.heads, l = layout_.layers;
  const int64_t p = layout_.patches();
  const int64_t map = h * n * n * kFloatBytes;  // one [H, N, N] float map
  const int64_t returned_per_layer = 1 + (layout_.has_resonance ? 1 : 0);
  int64_t bytes = (returned_per_layer + kTransientMapsPerLayer) * map + 2 * h * n * kFloatBytes;
  if (layout_.has_plug_gate) bytes += n * n * kFloatBytes;  // the layer's G, shared by heads
  if (options_.rollout) bytes += 3 * n * n * kDoubleBytes + p * kFloatBytes;
  if (options_.gates) bytes += l * h * p * kFloatBytes;
  if (options_.resonance) bytes += l * h * p * kFloatBytes + l * h * kFloatBytes;
  const auto count = [](const std::vector<int>& chosen, int64_t all) {
    return chosen.empty() ? all : static_cast<int64_t>(chosen.size());
  };
  const int64_t selected = count(options_.attention_heads, h) *
                           count(options_.attention_queries, n) * n * kFloatBytes;
  if (options_.plug_gates) bytes += l * count(options_.attention_queries, n) * n * kFloatBytes;
  const int64_t full = static_cast<int64_t>(options_.attention_layers.size());
  bytes += full * selected * (options_.resonance ? 2 : 1);
  return bytes;
}

absl::StatusOr<at::Tensor> TokenMapCollector::Map(const NamedTensors& maps,
                                                   const std::string& kind,
                                                   std::vector<int64_t> shape) const {
  auto it = maps.find(kind);
  if (it == maps.end()) {
    return absl::InternalError(absl::StrCat("model returned no '", kind, "' map"));
  }
  if (it->second.sizes() != at::IntArrayRef(shape)) {
    return absl::InternalError(absl::StrCat("model's '", kind, "' map is [",
                                            absl::StrJoin(it->second.sizes(), ", "),
                                            "], its metadata says [", absl::StrJoin(shape, ", "),
                                            "]"));
  }
  return it->second;
}

at::Tensor TokenMapCollector::Selected(const at::Tensor& maps) const {
  const auto index = [](const std::vector<int>& chosen) {
    return at::tensor(std::vector<int64_t>(chosen.begin(), chosen.end()), at::kLong);
  };
  at::Tensor out = maps;
  if (!options_.attention_heads.empty()) out = out.index_select(0, index(options_.attention_heads));
  if (!options_.attention_queries.empty()) {
    out = out.index_select(1, index(options_.attention_queries));
  }
  return out;
}

absl::Status TokenMapCollector::KeepInto(std::vector<at::Tensor>& into, const at::Tensor& t) {
  auto kept = Keep(t);
  if (!kept.ok()) return kept.status();
  into.push_back(*std::move(kept));
  return absl::OkStatus();
}

bool TokenMapCollector::WantsFull(int layer) const {
  const auto& wanted = options_.attention_layers;
  return std::find(wanted.begin(), wanted.end(), layer) != wanted.end();
}

absl::Status TokenMapCollector::Collect(int layer, const NamedTensors& maps) {
  const int64_t h = layout_.heads, n = layout_.tokens(), p = layout_.patches();
  auto attention = Map(maps, "attention", {h, n, n});
  if (!attention.ok()) return attention.status();
  if (options_.rollout) {
    if (absl::Status st = rollout_.Add(layer, *attention); !st.ok()) return st;
  }
  const bool full = WantsFull(layer);
  if (full) GS_RETURN_IF_ERROR(KeepInto(out_.attention, Selected(*attention)));
  const std::vector<int64_t> grid{h, layout_.grid_h, layout_.grid_w};
  if (options_.gates) {
    auto gate = Map(maps, "gate", {h, n});
    if (!gate.ok()) return gate.status();
    GS_RETURN_IF_ERROR(KeepInto(out_.gates, gate->narrow(1, 1, p).reshape(grid)));
  }
  if (options_.resonance) {
    auto r = Map(maps, "resonance", {h, n, n});
    if (!r.ok()) return r.status();
    auto vig = Map(maps, "vigilance", {h});
    if (!vig.ok()) return vig.status();
    GS_RETURN_IF_ERROR(KeepInto(out_.resonance, r->select(1, 0).narrow(1, 1, p).reshape(grid)));
    GS_RETURN_IF_ERROR(KeepInto(vigilance_rows_, *vig));
    if (full) GS_RETURN_IF_ERROR(KeepInto(out_.attention_resonance, Selected(*r)));
  }
  if (options_.plug_gates) {
    auto g = Map(maps, "plug_gate", {n, n});
    if (!g.ok()) return g.status();
    at::Tensor rows = *g;
    const auto& queries = options_.attention_queries;
    if (!queries.empty()) {
      rows = rows.index_select(
          0, at::tensor(std::vector<int64_t>(queries.begin(), queries.end()), at::kLong));
    }
    GS_RETURN_IF_ERROR(KeepInto(out_.plug_gates, rows));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenMaps> TokenMapCollector::Finish() {
  if (absl::Status st = CheckComplete(); !st.ok()) return st;
  if (options_.rollout) {
    out_.rollout = rollout_.result()[0]
                       .narrow(0, 1, layout_.patches())
                       .reshape({layout_.grid_h, layout_.grid_w})
                       .to(at::kFloat)
                       .contiguous();
  }
  if (options_.resonance) out_.vigilance = at::stack(vigilance_rows_);
  return std::move(out_);
}

NamedTensors TokenMapTensors(const TokenMaps& maps) {
  NamedTensors out;
  if (maps.rollout.defined()) out.emplace("rollout", maps.rollout);
  if (!maps.gates.empty()) out.emplace("gates", at::stack(maps.gates));
  if (!maps.resonance.empty()) out.emplace("resonance", at::stack(maps.resonance));
  if (maps.vigilance.defined()) out.emplace("vigilance", maps.vigilance);
  if (!maps.attention.empty()) out.emplace("attention", at::stack(maps.attention));
  if (!maps.attention_resonance.empty()) {
    out.emplace("attention_resonance", at::stack(maps.attention_resonance));
  }
  if (!maps.plug_gates.empty()) out.emplace("plug_gates", at::stack(maps.plug_gates));
  return out;
}

bool IsTokenMapOutput(const std::string& name) {
  for (const char* known : {"rollout", "gates", "resonance", "vigilance", "attention",
                            "attention_resonance", "plug_gates"}) {
    if (name == known) return true;
  }
  return false;
}

}  // namespace gatescope
