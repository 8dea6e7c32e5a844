// Argument validation and input preparation of gatescope::plug_attention.
#include "plug_op.h"

#include <ATen/ATen.h>

#include <cmath>

namespace gatescope::ops {

PlugShape CheckPlugArgs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& q_gate, const at::Tensor& k_gate,
                        const at::Tensor& gml_weight, const at::Tensor& gml_bias, double scale,
                        double gate_scale, bool tanh_gate) {
  TORCH_CHECK(q.dim() == 4, "plug_attention: q must be [B, H, N, d], got ", q.sizes());
  TORCH_CHECK(k.dim() == 4 && v.dim() == 4, "plug_attention: k and v must be 4-D, got ",
              k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q_gate.dim() == 3 && k_gate.dim() == 3,
              "plug_attention: q_gate and k_gate must be 3-D [B, N, dg] and [B, M, dg], got ",
              q_gate.sizes(), " and ", k_gate.sizes());
  const auto b = q.size(0), h = q.size(1), nq = q.size(2), d = q.size(3), nk = k.size(2);
  const auto dv = v.size(3), dg = q_gate.size(2);
  TORCH_CHECK(k.size(0) == b && k.size(1) == h && k.size(3) == d, "plug_attention: k ",
              k.sizes(), " does not fit q ", q.sizes());
  TORCH_CHECK(v.size(0) == b && v.size(1) == h && v.size(2) == nk, "plug_attention: v ",
              v.sizes(), " does not fit k ", k.sizes());
  TORCH_CHECK(q_gate.size(0) == b && q_gate.size(1) == nq, "plug_attention: q_gate ",
              q_gate.sizes(), " must be [B, N, dg] with B, N from q ", q.sizes());
  TORCH_CHECK(k_gate.size(0) == b && k_gate.size(1) == nk && k_gate.size(2) == dg,
              "plug_attention: k_gate ", k_gate.sizes(), " must be [B, M, dg] = [", b, ", ", nk,
              ", ", dg, "]");
  TORCH_CHECK(d > 0 && dv > 0 && dg > 0, "plug_attention: empty head or gate dim");
  for (const at::Tensor* t : {&k, &v, &q_gate, &k_gate}) {
    TORCH_CHECK(t->scalar_type() == q.scalar_type(),
                "plug_attention: q, k, v, q_gate and k_gate must share a dtype");
    TORCH_CHECK(t->device() == q.device(),
                "plug_attention: q, k, v, q_gate and k_gate must share a device");
  }
  TORCH_CHECK(at::isFloatingType(q.scalar_type()),
              "plug_attention: inputs must be floating point");
  TORCH_CHECK(gml_weight.numel() == 2,
              "plug_attention: gml_weight must have 2 elements ([2, 1]), got ", gml_weight.sizes());
  TORCH_CHECK(gml_bias.numel() == 2, "plug_attention: gml_bias must have 2 elements, got ",
              gml_bias.sizes());
  for (const at::Tensor* t : {&gml_weight, &gml_bias}) {
    TORCH_CHECK(at::isFloatingType(t->scalar_type()),
                "plug_attention: gml_weight and gml_bias must be floating point");
    TORCH_CHECK(t->device() == q.device(),
                "plug_attention: gml_weight and gml_bias must be on q's device");
  }
  TORCH_CHECK(std::isfinite(scale) && std::isfinite(gate_scale),
              "plug_attention: scale and gate_scale must be finite");
  PlugShape shape;
  shape.batch = b;
  shape.heads = h;
  shape.nq = nq;
  shape.nk = nk;
  shape.d = d;
  shape.dv = dv;
  shape.dg = dg;
  shape.scale = scale;
  shape.gate_scale = gate_scale;
  shape.tanh_gate = tanh_gate;
  return shape;
}

at::Tensor PlugGmlParams(const at::Tensor& gml_weight, const at::Tensor& gml_bias,
                         at::ScalarType dtype) {
  return at::cat({gml_weight.reshape({2}).to(dtype), gml_bias.reshape({2}).to(dtype)})
      .contiguous();
}

}  // namespace gatescope::ops
