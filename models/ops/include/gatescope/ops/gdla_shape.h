// Shapes, settings and raw-pointer arguments of the fused gated differential linear
// attention (GDLA) forward, shared by the CPU kernel, the CUDA kernel and their tests.
// Torch-free and CUDA-free.
#pragma once

#include <cstdint>

namespace gatescope::ops {

// All tensors are dense, row-major (contiguous):
//   q, k, v, g, out: [batch, heads, n, dim], dim = 2 d (even)
//   lam: [heads, dim]        norm_weight: [dim], or null for all ones
// phi(x) = ELU(x) + 1 = (x > 0 ? x + 1 : e^x). Feature channels [0, d) of q and k form
// branch 1, [d, dim) branch 2; both branches share all dim channels of v. Per head slice:
//   KV_j = sum_m phi(k_j[m]) v[m]^T  (d x dim)      z_j = sum_m phi(k_j[m])  (d)
//   A_j[n] = phi(q_j[n])^T KV_j / (phi(q_j[n]) . z_j + kGdlaLinearEps)
//   y = A_1 - lam[head] * A_2        (elementwise over the dim channels)
//   y *= norm_weight / sqrt(mean_c(y^2) + eps)
//   out[n] = y * gate(g[n])          (elementwise; sigmoid, SiLU or identity)
// Cost O(n dim^2) time and O(dim^2) memory per head slice: no n x n map exists.
inline constexpr double kGdlaLinearEps = 1e-6;

// Integer codes of the op's `gate` argument.
enum class GdlaGate : int { kSigmoid = 0, kSilu = 1, kNone = 2 };

struct GdlaShape {
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t n = 0;
  int64_t dim = 0;  // D = 2 d, even and > 0
  double eps = 1e-5;
  GdlaGate gate = GdlaGate::kSigmoid;
};

// Values in one head slice's key summary: the dim x dim matrix
// S[f][c] = sum_m phi(k[m][f]) v[m][c] (row f < d is KV_1, row d + f is KV_2), followed by
// the dim-vector z[f] = sum_m phi(k[m][f]) (z_1 then z_2).
inline constexpr int64_t GdlaSummarySize(int64_t dim) { return dim * (dim + 1); }

template <typename T>
struct GdlaPointers {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* g = nullptr;
  const T* lam = nullptr;
  const T* norm_weight = nullptr;  // null = all ones
  T* out = nullptr;
};

}  // namespace gatescope::ops
