// Argument validation and input preparation of gatescope::gdla_attention.
#include "gdla_op.h"

#include <ATen/ATen.h>

#include <cmath>

namespace gatescope::ops {
namespace {

bool HasWeight(const c10::optional<at::Tensor>& norm_weight) {
  return norm_weight.has_value() && norm_weight->defined();
}

}  // namespace

GdlaShape CheckGdlaArgs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& g, const at::Tensor& lam,
                        const c10::optional<at::Tensor>& norm_weight, double eps, int64_t gate) {
  TORCH_CHECK(q.dim() == 4, "gdla_attention: q must be [B, H, N, D], got ", q.sizes());
  const char* const names[] = {"k", "v", "g"};
  const at::Tensor* const others[] = {&k, &v, &g};
  for (int i = 0; i < 3; ++i) {
    const at::Tensor& t = *others[i];
    TORCH_CHECK(t.sizes() == q.sizes(), "gdla_attention: ", names[i], " ", t.sizes(),
                " must have q's shape ", q.sizes());
    TORCH_CHECK(t.scalar_type() == q.scalar_type(),
                "gdla_attention: q, k, v and g must share a dtype");
    TORCH_CHECK(t.device() == q.device(), "gdla_attention: q, k, v and g must share a device");
  }
  TORCH_CHECK(at::isFloatingType(q.scalar_type()), "gdla_attention: inputs must be floating point");
  const auto b = q.size(0), h = q.size(1), n = q.size(2), dim = q.size(3);
  TORCH_CHECK(dim > 0 && dim % 2 == 0, "gdla_attention: head dim D must be even and > 0, got ",
              dim);
  TORCH_CHECK(lam.dim() == 2 && lam.size(0) == h && lam.size(1) == dim,
              "gdla_attention: lam must be [H, D] = [", h, ", ", dim, "], got ", lam.sizes());
  TORCH_CHECK(at::isFloatingType(lam.scalar_type()), "gdla_attention: lam must be floating point");
  TORCH_CHECK(lam.device() == q.device(), "gdla_attention: lam must be on q's device");
  if (HasWeight(norm_weight)) {
    const at::Tensor& w = *norm_weight;
    TORCH_CHECK(w.dim() == 1 && w.size(0) == dim, "gdla_attention: norm_weight must be [D] = [",
                dim, "], got ", w.sizes());
    TORCH_CHECK(at::isFloatingType(w.scalar_type()),
                "gdla_attention: norm_weight must be floating point");
    TORCH_CHECK(w.device() == q.device(), "gdla_attention: norm_weight must be on q's device");
  }
  TORCH_CHECK(std::isfinite(eps) && eps >= 0, "gdla_attention: eps must be finite and >= 0");
  TORCH_CHECK(gate >= 0 && gate <= 2,
              "gdla_attention: gate must be 0 (sigmoid), 1 (silu) or 2 (none), got ", gate);
  GdlaShape shape;
  shape.batch = b;
  shape.heads = h;
  shape.n = n;
  shape.dim = dim;
  shape.eps = eps;
  shape.gate = static_cast<GdlaGate>(gate);
  return shape;
}

at::Tensor GdlaNormWeight(const c10::optional<at::Tensor>& norm_weight, at::ScalarType dtype) {
  if (!HasWeight(norm_weight)) return at::Tensor();
  return norm_weight->to(dtype).contiguous();
}

}  // namespace gatescope::ops
