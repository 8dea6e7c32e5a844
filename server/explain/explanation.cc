#include "server/explain/explanation.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace gatescope {

int CountLayers(const NamedTensors& maps, const std::string& kind) {
  int n = 0;
  while (maps.count(absl::StrCat(kind, ".", n))) ++n;
  return n;
}

absl::StatusOr<Explanation> BuildExplanation(const NamedTensors& maps,
                                             const ExplainOptions& options) {
  Explanation out;
  const int layers = CountLayers(maps, "attention");
  if (layers == 0) return absl::InvalidArgumentError("model returned no attention maps");
  const int64_t tokens = maps.at("attention.0").size(-1);
  const int64_t patches = static_cast<int64_t>(options.grid_h) * options.grid_w;
  const bool grid_ok =
      options.grid_h > 0 && options.grid_w > 0 && tokens == patches + 1;
  if ((options.rollout || options.gates) && !grid_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model's token grid ", options.grid_h, "x", options.grid_w,
        " plus a class token does not match its ", tokens, " tokens"));
  }
  if (options.rollout) {
    std::vector<at::Tensor> per_layer;
    for (int l = 0; l < layers; ++l) per_layer.push_back(maps.at(absl::StrCat("attention.", l)));
    auto r = AttentionRollout(per_layer, options.rollout_options);
    if (!r.ok()) return r.status();
    out.rollout = (*r)[0].narrow(0, 1, patches).reshape({options.grid_h, options.grid_w})
                      .to(at::kFloat);
  }
  if (options.gates) {
    const int gate_layers = CountLayers(maps, "gate");
    if (gate_layers == 0) return absl::InvalidArgumentError("model has no gate maps");
    for (int l = 0; l < gate_layers; ++l) {
      const at::Tensor g = maps.at(absl::StrCat("gate.", l));  // [H, N]
      if (g.dim() != 2 || g.size(1) != tokens) {
        return absl::InvalidArgumentError(absl::StrCat("gate map ", l, " is not [H, ", tokens, "]"));
      }
      out.gates.push_back(
          g.narrow(1, 1, patches).reshape({g.size(0), options.grid_h, options.grid_w})
              .to(at::kFloat).contiguous());
    }
  }
  for (int l : options.attention_layers) {
    if (l < 0 || l >= layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention layer ", l, " out of range 0..", layers - 1));
    }
    out.attention.push_back(maps.at(absl::StrCat("attention.", l)).to(at::kFloat).contiguous());
  }
  return out;
}

}  // namespace gatescope
