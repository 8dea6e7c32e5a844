// Launcher of the CUDA PLuG attention forward kernel. Plain C++ interface (no CUDA or Torch
// headers) so the ATen glue and the standalone kernel test can both call it.
#pragma once

#include <cstdint>

#include "gatescope/ops/plug_shape.h"

namespace gatescope::ops {

enum class PlugDType { kFloat32, kFloat16 };

// Largest of d, dv and dg the kernel accepts.
inline constexpr int64_t kPlugCudaMaxHeadDim = 128;

// Enqueues the forward on `stream` (a cudaStream_t; nullptr = default stream) and returns
// immediately. q, k, v, q_gate, k_gate and out are device pointers laid out as in
// PlugShape; for kFloat16 they point to IEEE half values (accumulation is fp32 either way).
// gml is a device float[4] = {w_a, w_b, b_a, b_b}, read by the kernel itself (the shape's
// w_a .. b_b fields are ignored), so no host copy or synchronisation is needed. nk may be 0
// (every row is then zero). Returns 0 on a successful launch, otherwise the cudaError_t
// value (an invalid-value error when d, dv or dg is not in [1, kPlugCudaMaxHeadDim] or the
// grid would be too large).
int LaunchPlugForward(const PlugShape& shape, PlugDType dtype, const void* q, const void* k,
                      const void* v, const void* q_gate, const void* k_gate, const float* gml,
                      void* out, void* stream);

// Human-readable message for a value returned by LaunchPlugForward.
const char* PlugCudaErrorString(int error);

}  // namespace gatescope::ops
