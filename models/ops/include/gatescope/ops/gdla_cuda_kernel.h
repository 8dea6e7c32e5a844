// Launcher of the CUDA gated differential linear attention (GDLA) forward. Plain C++
// interface (no CUDA or Torch headers) so the ATen glue and the standalone kernel test can
// both call it.
#pragma once

#include <cstdint>

#include "gatescope/ops/gdla_shape.h"

namespace gatescope::ops {

enum class GdlaDType { kFloat32, kFloat16 };

// Largest head dimension D the kernels accept.
inline constexpr int64_t kGdlaCudaMaxHeadDim = 128;

// Number of floats of device workspace LaunchGdlaForward needs for `shape` (the per-split
// partial key summaries and their sums); 0 when there is nothing to compute. Depends only
// on the shape.
int64_t GdlaCudaWorkspaceFloats(const GdlaShape& shape);

// Enqueues the forward on `stream` (a cudaStream_t; nullptr = default stream) and returns
// immediately. q, k, v, g and out are device pointers laid out as in GdlaShape; for
// kFloat16 they point to IEEE half values (accumulation is fp32 either way). lam
// ([heads, dim]) and norm_weight ([dim], or null for all ones) are device fp32 in both
// cases. workspace holds at least GdlaCudaWorkspaceFloats(shape) device floats and must not
// be used by other work on the stream until the forward is done. Returns 0 on a successful
// launch, otherwise the cudaError_t value (an invalid-value error when dim is odd or not in
// [2, kGdlaCudaMaxHeadDim], or n is too large for the grid).
int LaunchGdlaForward(const GdlaShape& shape, GdlaDType dtype, const void* q, const void* k,
                      const void* v, const void* g, const float* lam, const float* norm_weight,
                      void* out, float* workspace, void* stream);

// Human-readable message for a value returned by LaunchGdlaForward.
const char* GdlaCudaErrorString(int error);

}  // namespace gatescope::ops
