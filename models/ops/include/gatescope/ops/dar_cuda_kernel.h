// Launcher of the CUDA DAR attention forward kernel. Plain C++ interface (no CUDA or Torch
// headers) so the ATen glue and the standalone kernel test can both call it.
#pragma once

#include <cstdint>

#include "gatescope/ops/dar_shape.h"

namespace gatescope::ops {

enum class DarDType { kFloat32, kFloat16 };

// Largest head dimension (d and dv) the kernel accepts.
inline constexpr int64_t kDarCudaMaxHeadDim = 128;

// Enqueues the forward on `stream` (a cudaStream_t; nullptr = default stream) and returns
// immediately. q, k, v and out are device pointers laid out as in DarShape; for kFloat16
// they point to IEEE half values (accumulation is fp32 either way). key_mask is a device
// uint8 [batch, nk] (1 = visible) or null for all visible. row_stats is a device float
// [batch, heads, nq, 2] that the kernel fully overwrites. nk may be 0 (every row is then
// zero). Returns 0 on a successful launch, otherwise the cudaError_t value (an
// invalid-value error when d or dv is not in [1, kDarCudaMaxHeadDim] or steps < 1).
int LaunchDarForward(const DarShape& shape, DarDType dtype, const void* q, const void* k,
                     const void* v, const uint8_t* key_mask, void* out, float* row_stats,
                     void* stream);

// Human-readable message for a value returned by LaunchDarForward.
const char* DarCudaErrorString(int error);

}  // namespace gatescope::ops
