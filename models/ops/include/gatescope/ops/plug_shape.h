// Shapes, settings and raw-pointer arguments of the fused PLuG (pairwise logit gating)
// attention forward, shared by the CPU kernel, the CUDA kernel and their tests. Torch-free
// and CUDA-free.
#pragma once

#include <cstdint>

namespace gatescope::ops {

// All tensors are dense, row-major (contiguous):
//   q: [batch, heads, nq, d]   k: [batch, heads, nk, d]   v: [batch, heads, nk, dv]
//   q_gate: [batch, nq, dg]    k_gate: [batch, nk, dg]   (shared by all heads)
//   out: [batch, heads, nq, dv]
// Per batch b, head h, query row i and key j:
//   s_hij = scale * q_hi . k_hj
//   r_ij  = gate_scale * qg_i . kg_j                       (one value for every head)
//   G_ij  = tanh((w_a r_ij + b_a) (w_b r_ij + b_b))       (no tanh when !tanh_gate)
//   out_hi = sum_j softmax_j(s_hij (1 + G_ij)) v_hj;  a row is 0 when nk == 0.
struct PlugShape {
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t nq = 0;
  int64_t nk = 0;
  int64_t d = 0;
  int64_t dv = 0;
  int64_t dg = 0;
  double scale = 1.0;
  double gate_scale = 1.0;
  bool tanh_gate = true;
  // The gating modulation layer (1 -> 2), read by the CPU kernel. The CUDA launcher ignores
  // these four and reads a device copy instead (see plug_cuda_kernel.h), so the op never
  // waits for the device to read them.
  double w_a = 0.0, w_b = 0.0, b_a = 0.0, b_b = 1.0;
};

template <typename T>
struct PlugPointers {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* q_gate = nullptr;
  const T* k_gate = nullptr;
  T* out = nullptr;
};

}  // namespace gatescope::ops
