// Launcher of the CUDA M-DGSA forward kernel. Plain C++ interface (no CUDA or Torch
// headers) so the ATen glue and the standalone kernel test can both call it.
#pragma once

#include <cstdint>

#include "gatescope/ops/dgsa_shape.h"

namespace gatescope::ops {

enum class DgsaDType { kFloat32, kFloat16 };

// Largest head dimension (d and dv) the kernel accepts.
inline constexpr int64_t kDgsaCudaMaxHeadDim = 128;

// Enqueues the forward on `stream` (a cudaStream_t; nullptr = default stream) and returns
// immediately. Pointers are device pointers laid out as in DgsaShape; for kFloat16 they
// point to IEEE half values. key_mask is a device uint8 [batch_heads / shape.heads, nk]
// (nonzero = visible) or null for all visible; a row that sees no key is written as 0.
// Returns 0 on a successful launch, otherwise the cudaError_t value (an invalid-value error
// when d or dv exceeds kDgsaCudaMaxHeadDim, or a mask comes with shape.heads < 1).
int LaunchDgsaForward(const DgsaShape& shape, DgsaDType dtype, const void* q_pos,
                      const void* k_pos, const void* q_neg, const void* k_neg, const void* v,
                      const void* gate, const uint8_t* key_mask, void* out, void* stream);

// Human-readable message for a value returned by LaunchDgsaForward.
const char* DgsaCudaErrorString(int error);

}  // namespace gatescope::ops
