// Shapes and raw-pointer arguments of the fused M-DGSA forward, shared by the CPU kernel,
// the CUDA kernel and their tests. Torch-free and CUDA-free.
#pragma once

#include <cstdint>

namespace gatescope::ops {

// All tensors are dense, row-major (contiguous):
//   q_pos, q_neg: [batch_heads, nq, d]      k_pos, k_neg: [batch_heads, nk, d]
//   v:            [batch_heads, nk, dv]     gate:         [batch_heads, nq]
//   out:          [batch_heads, nq, dv]
//   key_mask:     [batch_heads / heads, nk] (nonzero = visible) or null (all visible);
//                 slice bh reads row bh / heads (batch_heads = batch * heads).
// out = g * softmax(scale q+ k+^T) v - (1 - g) * softmax(scale q- k-^T) v, per row, both
// softmaxes over the visible keys only (a hidden key's logit is -inf); a row with no visible
// key is 0.
struct DgsaShape {
  int64_t batch_heads = 0;
  int64_t nq = 0;
  int64_t nk = 0;
  int64_t d = 0;
  int64_t dv = 0;
  double scale = 1.0;
  // Heads per batch entry; only indexes key_mask (last, so {bh, nq, nk, d, dv, scale}
  // initialisers keep meaning one head per mask row).
  int64_t heads = 1;
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
  const uint8_t* key_mask = nullptr;  // [batch, nk], nonzero = visible; null = all visible
};

}  // namespace gatescope::ops
