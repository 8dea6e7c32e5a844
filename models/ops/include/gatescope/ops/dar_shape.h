// Shapes, settings and raw-pointer arguments of the fused DAR attention forward, shared by
// the CPU kernel, the CUDA kernel and their tests. Torch-free and CUDA-free.
#pragma once

#include <cstdint>

namespace gatescope::ops {

// All tensors are dense, row-major (contiguous):
//   q: [batch, heads, nq, d]   k: [batch, heads, nk, d]   v: [batch, heads, nk, dv]
//   key_mask: [batch, nk] (1 = visible) or null (all visible)
//   out: [batch, heads, nq, dv]
//   row_stats: [batch, heads, nq, 2]: per query row, the number of visible keys whose
//     cosine exceeds rho, then the number of visible keys.
// Per row i, over visible keys j (key_mask[j] and, if causal, j <= i):
//   c_ij = (q_i . k_j) / ((|q_i| + kDarNormEps) (|k_j| + kDarNormEps))
//   r^(0) = 0, r^(t+1) = sigmoid(alpha (c_ij + beta r^(t) - rho)), r = r^(steps)
//   out_i = sum_j softmax_j(scale q_i . k_j + lam r_ij) v_j; a row with no visible key is 0.
inline constexpr double kDarNormEps = 1e-8;

struct DarShape {
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t nq = 0;
  int64_t nk = 0;
  int64_t d = 0;
  int64_t dv = 0;
  double scale = 1.0;
  float lam = 0.0f;
  float rho = 0.5f;
  float alpha = 8.0f;
  float beta = 0.0f;
  int steps = 1;  // >= 1; steps > 1 requires alpha * beta / 4 < 1 (checked by the op)
  bool causal = false;
};

template <typename T>
struct DarPointers {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const uint8_t* key_mask = nullptr;
  T* out = nullptr;
  float* row_stats = nullptr;
};

}  // namespace gatescope::ops
