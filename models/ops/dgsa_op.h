// Argument validation shared by every backend of gatescope::dgsa_attention.
#pragma once

#include <c10/util/Optional.h>

#include <torch/library.h>

#include "gatescope/ops/dgsa_shape.h"

namespace gatescope::ops {

// Checks ranks, shapes, dtypes, devices and the optional key padding mask ([B, Nk], bool or
// uint8, on q's device; nonzero = visible) (TORCH_CHECK: a caller error raises c10::Error)
// and returns the flattened problem shape with scale = 1/sqrt(d) and heads = H.
DgsaShape CheckDgsaArgs(const at::Tensor& q_pos, const at::Tensor& k_pos,
                        const at::Tensor& q_neg, const at::Tensor& k_neg,
                        const at::Tensor& v, const at::Tensor& gate,
                        const c10::optional<at::Tensor>& key_padding_mask);

// The mask as a contiguous one-byte tensor [B, Nk] on q's device (bool or uint8 as given:
// no conversion, since a bool is one byte holding 0 or 1), or an undefined tensor for none.
// Read its data as uint8 with DgsaMaskData.
at::Tensor DgsaMaskBytes(const c10::optional<at::Tensor>& key_padding_mask);

// The bytes of a DgsaMaskBytes result (nonzero = visible), or null for an undefined tensor.
const uint8_t* DgsaMaskData(const at::Tensor& mask_bytes);

}  // namespace gatescope::ops
