// ATen tensors as gatescope.v1.Tensor messages (dense, row-major, little-endian).
#pragma once

#include <ATen/core/Tensor.h>

#include "gatescope/v1/inference.pb.h"

namespace gatescope {

// `t` converted to float32 and copied into `out` as FLOAT32 with its shape.
void ToFloatProto(const at::Tensor& t, ::gatescope::v1::Tensor* out);

// `t` converted to uint8 and copied into `out` as UINT8 with its shape.
void ToUint8Proto(const at::Tensor& t, ::gatescope::v1::Tensor* out);

}  // namespace gatescope
