// Argument validation and result assembly shared by every backend of
// gatescope::dar_attention.
#pragma once

#include <c10/util/Optional.h>

#include <torch/library.h>

#include "gatescope/ops/dar_shape.h"

namespace gatescope::ops {

struct DarSettings {
  bool causal = false;
  double lam = 0.0, rho = 0.5, alpha = 8.0, beta = 0.0;
  int64_t steps = 1;
};

// Checks ranks, shapes, dtypes, devices, the mask ([B, Nk], bool or uint8) and the DAR
// settings (alpha > 0, steps >= 1, and the contraction condition alpha * beta / 4 < 1 when
// steps > 1); a caller error raises c10::Error. Returns the problem with scale = 1/sqrt(d).
DarShape CheckDarArgs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const c10::optional<at::Tensor>& key_padding_mask,
                      const DarSettings& settings);

// The mask as contiguous uint8 [B, Nk] on q's device, or an undefined tensor for none.
at::Tensor DarMaskBytes(const c10::optional<at::Tensor>& key_padding_mask);

// Per-(batch, head) vigilance-crossing fraction [B, H] (in `dtype`) from the kernels'
// row_stats [B, H, Nq, 2]; 0 where no pair is visible.
at::Tensor DarCrossingFraction(const at::Tensor& row_stats, at::ScalarType dtype);

}  // namespace gatescope::ops
