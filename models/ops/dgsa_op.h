// Argument validation shared by every backend of gatescope::dgsa_attention.
#pragma once

#include <torch/library.h>

#include "gatescope/ops/dgsa_shape.h"

namespace gatescope::ops {

// Checks ranks, shapes, dtypes and devices (TORCH_CHECK: a caller error raises
// c10::Error) and returns the flattened problem shape with scale = 1/sqrt(d).
DgsaShape CheckDgsaArgs(const at::Tensor& q_pos, const at::Tensor& k_pos,
                        const at::Tensor& q_neg, const at::Tensor& k_neg,
                        const at::Tensor& v, const at::Tensor& gate);

}  // namespace gatescope::ops
