#include "server/frontend/grpc/explain_call.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace gatescope {

MapLayout LayoutOf(const ModelConfig& config) {
  MapLayout layout;
  layout.layers = config.layers();
  layout.heads = config.heads();
  if (config.token_grid_size() == 2 && config.cls_token()) {
    layout.grid_h = config.token_grid(0);
    layout.grid_w = config.token_grid(1);
  }
  bool has_attention = false;
  for (const auto& kind : config.maps()) {
    has_attention |= kind == "attention";
    layout.has_gate |= kind == "gate";
    layout.has_resonance |= kind == "resonance";
    layout.has_plug_gate |= kind == "plug_gate";
  }
  if (!has_attention) layout.layers = 0;  // cannot explain
  return layout;
}

absl::StatusOr<std::shared_ptr<ExplanationBuilder>> StartExplanation(
    const ServedModel& model, const ExplainOptions& options, int64_t max_bytes) {
  auto builder = ExplanationBuilder::Create(LayoutOf(model.config), options);
  if (!builder.ok()) return builder.status();
  const int64_t bytes = (*builder)->PeakBytes();
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("explanation would hold ", bytes, " bytes, over the server's cap of ",
                     max_bytes, " (--explain_max_bytes); ask for fewer attention layers"));
  }
  return std::shared_ptr<ExplanationBuilder>(std::move(*builder));
}

void AttachExplanation(std::shared_ptr<ExplanationBuilder> builder, int layers, WorkItem& item) {
  item.explain_layers = layers;
  item.explain_layer = [builder = std::move(builder)](int layer, const NamedTensors& maps) {
    return builder->AddLayer(layer, maps);
  };
}

NamedTensors ExplanationTensors(const Explanation& ex) {
  NamedTensors out;
  if (ex.rollout.defined()) out.emplace("rollout", ex.rollout);
  if (!ex.gates.empty()) out.emplace("gates", at::stack(ex.gates));
  if (!ex.resonance.empty()) out.emplace("resonance", at::stack(ex.resonance));
  if (ex.vigilance.defined()) out.emplace("vigilance", ex.vigilance);
  if (!ex.attention.empty()) out.emplace("attention", at::stack(ex.attention));
  if (!ex.attention_resonance.empty()) {
    out.emplace("attention_resonance", at::stack(ex.attention_resonance));
  }
  if (!ex.plug_gates.empty()) out.emplace("plug_gates", at::stack(ex.plug_gates));
  return out;
}

bool IsExplanationOutput(const std::string& name) {
  for (const char* known :
       {"rollout", "gates", "resonance", "vigilance", "attention", "attention_resonance",
        "plug_gates"}) {
    if (name == known) return true;
  }
  return false;
}

}  // namespace gatescope
