// Launcher of the CUDA multi-scale deformable attention forward. Plain C++ interface (no
// CUDA or Torch headers) so the ATen glue and the standalone kernel test can both call it.
#pragma once

#include <cstdint>

#include "gatescope/ops/ms_deform_shape.h"

namespace gatescope::ops {

enum class MsDeformDType { kFloat32, kFloat16, kFloat64 };

// Enqueues the forward on `stream` (a cudaStream_t; nullptr = default stream) and returns
// immediately. Every pointer is a device pointer laid out as in MsDeformShape; value,
// sampling_locations, attention_weights and out hold `dtype` values (IEEE half for
// kFloat16; accumulation and the bilinear weights are fp32 for kFloat16 and kFloat32, fp64
// for kFloat64). spatial_shapes and level_start are device int64 and must describe the
// levels consistently (the op checks that; the kernel trusts them). out is fully
// overwritten. Returns 0 on a successful launch (or when there is nothing to compute),
// otherwise the cudaError_t value (an invalid-value error for a negative dimension).
int LaunchMsDeformForward(const MsDeformShape& shape, MsDeformDType dtype, const void* value,
                          const int64_t* spatial_shapes, const int64_t* level_start,
                          const void* sampling_locations, const void* attention_weights,
                          void* out, void* stream);

// Human-readable message for a value returned by LaunchMsDeformForward.
const char* MsDeformCudaErrorString(int error);

}  // namespace gatescope::ops
