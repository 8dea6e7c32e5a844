#include "server/explain/rollout.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

constexpr double kEps = 1e-12;

absl::StatusOr<at::Tensor> FuseHeads(at::Tensor maps, const RolloutOptions& o) {
  if (o.signed_maps == "clamp") {
    maps = maps.clamp_min(0);
  } else if (o.signed_maps == "abs") {
    maps = maps.abs();
  } else if (o.signed_maps != "raw") {
    return absl::InvalidArgumentError("signed handling must be raw, clamp or abs");
  }
  if (o.head_fusion == "mean") return maps.mean(0);
  if (o.head_fusion == "max") return std::get<0>(maps.max(0));
  if (o.head_fusion == "min") return std::get<0>(maps.min(0));
  return absl::InvalidArgumentError("head fusion must be mean, max or min");
}

}  // namespace

absl::StatusOr<at::Tensor> AttentionRollout(const std::vector<at::Tensor>& layers,
                                            const RolloutOptions& options) {
  if (layers.empty()) return absl::InvalidArgumentError("no attention maps to roll out");
  if (!(options.discard_ratio >= 0.0 && options.discard_ratio < 1.0)) {
    return absl::InvalidArgumentError("discard_ratio must be in [0, 1)");
  }
  if (options.start_layer < 0 || options.start_layer >= static_cast<int>(layers.size())) {
    return absl::InvalidArgumentError(absl::StrCat("start_layer must be in 0..",
                                                   layers.size() - 1));
  }
  const int64_t n = layers.front().size(-1);
  const at::Tensor eye = at::eye(n, at::kDouble);
  at::Tensor result = eye.clone();
  for (size_t l = static_cast<size_t>(options.start_layer); l < layers.size(); ++l) {
    const at::Tensor& maps = layers[l];
    if (maps.dim() != 3 || maps.size(1) != n || maps.size(2) != n) {
      return absl::InvalidArgumentError("attention maps must all be [H, N, N]");
    }
    auto fused = FuseHeads(maps.to(at::kDouble), options);
    if (!fused.ok()) return fused.status();
    at::Tensor a = *fused;
    const int64_t k = static_cast<int64_t>(options.discard_ratio * static_cast<double>(n - 1));
    if (k > 0) {
      at::Tensor body = a.narrow(1, 1, n - 1);
      // Stable: among equal weights the lowest column index is discarded first.
      const at::Tensor idx =
          std::get<1>(body.abs().sort(/*stable=*/true, -1, /*descending=*/false)).narrow(1, 0, k);
      body = body.scatter(-1, idx, 0.0);
      a = at::cat({a.narrow(1, 0, 1), body}, 1);
    }
    a = a + eye;
    const at::Tensor sums = a.sum(-1, /*keepdim=*/true);
    const at::Tensor ok = sums.abs() > kEps;
    a = at::where(ok, a / at::where(ok, sums, at::ones_like(sums)), eye);
    result = at::matmul(a, result);
  }
  return result;
}

}  // namespace gatescope
