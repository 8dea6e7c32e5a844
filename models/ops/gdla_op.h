// Argument validation and input preparation shared by every backend of
// gatescope::gdla_attention.
#pragma once

#include <c10/util/Optional.h>

#include <torch/library.h>

#include "gatescope/ops/gdla_shape.h"

namespace gatescope::ops {

// Checks ranks and shapes (q, k, v, g equal [B, H, N, D] with D even and > 0, lam [H, D],
// norm_weight [D]), dtypes (q, k, v, g share one floating type; lam and norm_weight are
// floating, of any such type), devices (all on q's), eps (finite, >= 0) and gate (0, 1 or
// 2); a caller error raises c10::Error. Returns the problem shape.
GdlaShape CheckGdlaArgs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& g, const at::Tensor& lam,
                        const c10::optional<at::Tensor>& norm_weight, double eps, int64_t gate);

// norm_weight as a contiguous `dtype` tensor, or an undefined tensor for none.
at::Tensor GdlaNormWeight(const c10::optional<at::Tensor>& norm_weight, at::ScalarType dtype);

}  // namespace gatescope::ops
