// Argument validation and result assembly of gatescope::dar_attention.
#include "dar_op.h"

#include <ATen/ATen.h>

#include <cmath>

namespace gatescope::ops {

DarShape CheckDarArgs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const c10::optional<at::Tensor>& key_padding_mask,
                      const DarSettings& settings) {
  TORCH_CHECK(q.dim() == 4, "dar_attention: q must be [B, H, Nq, d], got ", q.sizes());
  TORCH_CHECK(k.dim() == 4 && v.dim() == 4, "dar_attention: k and v must be 4-D");
  const auto b = q.size(0), h = q.size(1), nq = q.size(2), d = q.size(3), nk = k.size(2);
  TORCH_CHECK(k.size(0) == b && k.size(1) == h && k.size(3) == d, "dar_attention: k ",
              k.sizes(), " does not fit q ", q.sizes());
  TORCH_CHECK(v.size(0) == b && v.size(1) == h && v.size(2) == nk, "dar_attention: v ",
              v.sizes(), " does not fit k ", k.sizes());
  TORCH_CHECK(d > 0 && v.size(3) > 0, "dar_attention: empty head dim");
  for (const at::Tensor* t : {&k, &v}) {
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "dar_attention: q, k, v must share a dtype");
    TORCH_CHECK(t->device() == q.device(), "dar_attention: q, k, v must share a device");
  }
  TORCH_CHECK(at::isFloatingType(q.scalar_type()), "dar_attention: inputs must be floating point");
  if (key_padding_mask.has_value()) {
    const at::Tensor& m = *key_padding_mask;
    TORCH_CHECK(m.dim() == 2 && m.size(0) == b && m.size(1) == nk,
                "dar_attention: key_padding_mask must be [B, Nk] = [", b, ", ", nk, "], got ",
                m.sizes());
    TORCH_CHECK(m.scalar_type() == at::kBool || m.scalar_type() == at::kByte,
                "dar_attention: key_padding_mask must be bool or uint8");
    TORCH_CHECK(m.device() == q.device(), "dar_attention: key_padding_mask must be on q's device");
  }
  TORCH_CHECK(settings.alpha > 0, "dar_attention: alpha must be > 0");
  TORCH_CHECK(settings.steps >= 1, "dar_attention: steps must be >= 1");
  TORCH_CHECK(settings.steps == 1 || settings.alpha * settings.beta / 4.0 < 1.0,
              "dar_attention: unrolled dynamics need alpha * beta / 4 < 1 (got ",
              settings.alpha * settings.beta / 4.0, ")");
  TORCH_CHECK(std::isfinite(settings.lam) && std::isfinite(settings.rho) &&
                  std::isfinite(settings.beta),
              "dar_attention: lam, rho and beta must be finite");
  DarShape shape;
  shape.batch = b;
  shape.heads = h;
  shape.nq = nq;
  shape.nk = nk;
  shape.d = d;
  shape.dv = v.size(3);
  shape.scale = 1.0 / std::sqrt(static_cast<double>(d));
  shape.lam = static_cast<float>(settings.lam);
  shape.rho = static_cast<float>(settings.rho);
  shape.alpha = static_cast<float>(settings.alpha);
  shape.beta = static_cast<float>(settings.beta);
  shape.steps = static_cast<int>(settings.steps);
  shape.causal = settings.causal;
  return shape;
}

at::Tensor DarMaskBytes(const c10::optional<at::Tensor>& key_padding_mask) {
  if (!key_padding_mask.has_value()) return at::Tensor();
  return key_padding_mask->to(at::kByte).contiguous();
}

at::Tensor DarCrossingFraction(const at::Tensor& row_stats, at::ScalarType dtype) {
  const at::Tensor totals = row_stats.to(at::kDouble).sum(2);  // [B, H, 2]
  const at::Tensor crossings = totals.select(-1, 0), visible = totals.select(-1, 1);
  return (crossings / visible.clamp_min(1.0)).to(dtype);
}

}  // namespace gatescope::ops
