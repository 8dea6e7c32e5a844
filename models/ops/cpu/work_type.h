// The precision the CPU backends compute in, shared by every op: float64 inputs run in
// float64, every other floating type (float32, float16, bfloat16) in float32, and results
// are cast back to the input's type by the caller. Pure, thread-safe.
#pragma once

#include <ATen/ATen.h>

namespace gatescope::ops {

inline at::ScalarType WorkType(at::ScalarType in) {
  return in == at::kDouble ? at::kDouble : at::kFloat;
}

// `t` in `work` precision, contiguous (no copy when it already is both).
inline at::Tensor ToWork(const at::Tensor& t, at::ScalarType work) {
  return t.to(work).contiguous();
}

// Calls run(double{}) for float64 work, run(float{}) otherwise.
template <typename Run>
void DispatchWork(at::ScalarType work, Run&& run) {
  if (work == at::kDouble) {
    run(double{});
  } else {
    run(float{});
  }
}

}  // namespace gatescope::ops
