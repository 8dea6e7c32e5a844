#include "server/explain/rollout.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/where.h>

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

absl::Status CheckRolloutOptions(const RolloutOptions& options, int layers) {
  if (layers <= 0) return absl::InvalidArgumentError("no attention maps to roll out");
  if (!(options.discard_ratio >= 0.0 && options.discard_ratio < 1.0)) {
    return absl::InvalidArgumentError("discard_ratio must be in [0, 1)");
  }
  if (options.start_layer < 0 || options.start_layer >= layers) {
    return absl::InvalidArgumentError(absl::StrCat("start_layer must be in 0..", layers - 1));
  }
  if (options.signed_maps != "clamp" && options.signed_maps != "abs" &&
      options.signed_maps != "raw") {
    return absl::InvalidArgumentError("signed handling must be raw, clamp or abs");
  }
  if (options.head_fusion != "mean" && options.head_fusion != "max" &&
      options.head_fusion != "min") {
    return absl::InvalidArgumentError("head fusion must be mean, max or min");
  }
  return absl::OkStatus();
}

absl::Status RolloutAccumulator::Add(int layer, const at::Tensor& maps) {
  if (maps.dim() != 3 || maps.size(1) != maps.size(2)) {
    return absl::InvalidArgumentError("attention maps must be [H, N, N]");
  }
  const int64_t n = maps.size(-1);
  if (result_.defined() && result_.size(0) != n) {
    return absl::InvalidArgumentError("attention maps must all be [H, N, N]");
  }
  const at::Tensor eye = at::eye(n, at::kDouble);
  if (!result_.defined()) result_ = eye.clone();
  if (layer < options_.start_layer) return absl::OkStatus();
  auto fused = FuseHeads(maps.to(at::kDouble), options_);
  if (!fused.ok()) return fused.status();
  at::Tensor a = *fused;
  const int64_t k = static_cast<int64_t>(options_.discard_ratio * static_cast<double>(n - 1));
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
  result_ = at::matmul(a, result_);
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> AttentionRollout(const std::vector<at::Tensor>& layers,
                                            const RolloutOptions& options) {
  if (absl::Status st = CheckRolloutOptions(options, static_cast<int>(layers.size()));
      !st.ok()) {
    return st;
  }
  RolloutAccumulator acc(options);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (absl::Status st = acc.Add(static_cast<int>(l), layers[l]); !st.ok()) return st;
  }
  return acc.result();
}

}  // namespace gatescope
