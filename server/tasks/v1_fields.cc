#include "server/tasks/v1_fields.h"

namespace gatescope {

const char* ClassifierExplainOption(const ::gatescope::v1::ExplainRequest& r) {
  const auto& ro = r.rollout_options();
  const bool rollout_options = !ro.head_fusion().empty() || !ro.signed_maps().empty() ||
                               ro.discard_ratio() != 0 || ro.start_layer() != 0;
  if (r.rollout() || rollout_options) return "rollout";
  if (r.attention_layers_size() || r.attention_heads_size() || r.attention_queries_size()) {
    return "attention_layers / attention_heads / attention_queries";
  }
  if (r.resonance()) return "resonance";
  if (r.heatmap_png()) return "heatmap_png";
  return nullptr;
}

}  // namespace gatescope
