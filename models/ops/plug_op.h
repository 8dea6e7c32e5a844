// Argument validation and input preparation shared by every backend of
// gatescope::plug_attention.
#pragma once

#include <torch/library.h>

#include "gatescope/ops/plug_shape.h"

namespace gatescope::ops {

// Checks ranks and shapes (q [B, H, N, d], k [B, H, M, d], v [B, H, M, dv], q_gate
// [B, N, dg], k_gate [B, M, dg] with d, dv, dg > 0; gml_weight and gml_bias 2 elements
// each), dtypes (q, k, v, q_gate, k_gate share one floating type; gml_weight and gml_bias
// are floating, of any such type), devices (all on q's) and that scale and gate_scale are
// finite; a caller error raises c10::Error. Returns the problem shape with the gml fields
// left at their defaults (see PlugGmlParams).
PlugShape CheckPlugArgs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& q_gate, const at::Tensor& k_gate,
                        const at::Tensor& gml_weight, const at::Tensor& gml_bias, double scale,
                        double gate_scale, bool tanh_gate);

// The gating modulation layer as one contiguous `dtype` tensor [w_a, w_b, b_a, b_b] on the
// weights' device (no host synchronisation).
at::Tensor PlugGmlParams(const at::Tensor& gml_weight, const at::Tensor& gml_bias,
                         at::ScalarType dtype);

}  // namespace gatescope::ops
