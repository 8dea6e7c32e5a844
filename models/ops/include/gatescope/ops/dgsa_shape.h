// Shapes and raw-pointer arguments of the fused M-DGSA forward, shared by the CPU kernel,
// the CUDA kernel and their tests. Torch-free and CUDA-free.
#pragma once

#include <cstdint>

namespace gatescope::ops {

// All tensors are dense, row-major (contiguous):
//   q_pos, q_neg: [batch_heads, nq, d]      k_pos, k_neg: [batch_heads, nk, d]
//   v:            [batch_heads, nk, dv]     gate:         [batch_heads, nq]
//   out:          [batch_heads, nq, dv]
// out = g * softmax(scale q+ k+^T) v - (1 - g) * softmax(scale q- k-^T) v, per row.
struct DgsaShape {
  int64_t batch_heads = 0;
  int64_t nq = 0;
  int64_t nk = 0;
  int64_t d = 0;
  int64_t dv = 0;
  double scale = 1.0;
};

template <typename T>
struct DgsaPointers {
  const T* q_pos = nullptr;
  const T* k_pos = nullptr;
  const T* q_neg = nullptr;
  const T* k_neg = nullptr;
  const T* v = nullptr;
  const T* gate = nullptr;
  T* out = nullptr;
};

}  // namespace gatescope::ops
