// Streaming CPU kernel of the fused M-DGSA forward (torch-free, header-only).
//
// Each query row keeps two running (max, sum, accumulator) triples, one per branch, and
// visits keys in blocks of kKeyBlock; no N x N map is ever held. Memory per call is
// O(rows * (d + dv) + kKeyBlock * (d + dv)). Thread-safe: callers may run disjoint (head, row-range) slices in parallel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gatescope/ops/dgsa_shape.h"

namespace gatescope::ops {

inline constexpr int64_t kKeyBlock = 64;

// The kernel's functions are forced inline so a caller compiled for a wider instruction
// set (e.g. a target_clones dispatcher) gets them vectorised for that set.
#if defined(__GNUC__)
#define GS_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define GS_KERNEL_INLINE inline
#endif

namespace detail {

// exp for float written so loops over arrays auto-vectorise: 2^n * P(r) with
// n = round(x / ln 2), r = x - n ln 2 and a degree-6 polynomial (about 1 ulp for
// x in [-87, 0]; inputs below -87 are clamped, giving ~1e-38 instead of 0).
GS_KERNEL_INLINE float VecExp(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
GS_KERNEL_INLINE double VecExp(double x) { return std::exp(x); }

// Online-softmax state of one branch for one query row.
template <typename Acc>
struct BranchState {
  Acc max = -std::numeric_limits<Acc>::infinity();
  Acc sum = 0;
};

// Folds the scores s[0..n) (already scaled) of one key block into `st` and acc[dv];
// values are the block's rows, vb[j * dv + c]. p is scratch of kKeyBlock.
template <typename Acc, int kDv>
GS_KERNEL_INLINE void FoldBlock(const Acc* s, int64_t n, const Acc* __restrict__ vb,
                                int64_t dv_runtime, BranchState<Acc>& st,
                                Acc* __restrict__ acc, Acc* __restrict__ p) {
  const int64_t dv = kDv > 0 ? kDv : dv_runtime;
  // Lane-wise partial max and sum (kLanes independent chains) so both reductions
  // vectorise without reassociating a single floating-point chain.
  constexpr int kLanes = 8;
  Acc lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = s[0];
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
  }
  Acc block_max = lane[0];
  for (int l = 1; l < kLanes; ++l) block_max = lane[l] > block_max ? lane[l] : block_max;
  for (; j < n; ++j) block_max = s[j] > block_max ? s[j] : block_max;
  const Acc new_max = std::max(st.max, block_max);
  const Acc correction = std::exp(st.max - new_max);  // exp(-inf) = 0 on the first block
  for (int64_t c = 0; c < dv; ++c) acc[c] *= correction;
  for (j = 0; j < n; ++j) p[j] = VecExp(s[j] - new_max);
  for (int l = 0; l < kLanes; ++l) lane[l] = 0;
  for (j = 0; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += p[j + l];
  }
  Acc block_sum = 0;
  for (; j < n; ++j) block_sum += p[j];
  for (int l = 0; l < kLanes; ++l) block_sum += lane[l];
  st.sum = st.sum * correction + block_sum;
  if constexpr (kDv > 0) {
    // Fixed width: accumulate in a local array the compiler keeps in registers.
    Acc local[kDv];
    for (int c = 0; c < kDv; ++c) local[c] = acc[c];
    for (int64_t jj = 0; jj < n; ++jj) {
      const Acc pj = p[jj];
      const Acc* vj = vb + jj * kDv;
      for (int c = 0; c < kDv; ++c) local[c] += pj * vj[c];
    }
    for (int c = 0; c < kDv; ++c) acc[c] = local[c];
  } else {
    for (int64_t jj = 0; jj < n; ++jj) {
      const Acc pj = p[jj];
      const Acc* vj = vb + jj * dv;
      for (int64_t c = 0; c < dv; ++c) acc[c] += pj * vj[c];
    }
  }
  st.max = new_max;
}

// s[j] = scale * <q, k_j> for a transposed key block kt[c * kKeyBlock + j].
template <typename Acc, int kD>
GS_KERNEL_INLINE void BlockScores(const Acc* __restrict__ q, const Acc* __restrict__ kt,
                                  int64_t n, int64_t d_runtime, Acc* __restrict__ s) {
  const int64_t d = kD > 0 ? kD : d_runtime;
  for (int64_t j = 0; j < n; ++j) s[j] = 0;
  for (int64_t c = 0; c < d; ++c) {
    const Acc qc = q[c];
    const Acc* row = kt + c * kKeyBlock;
    for (int64_t j = 0; j < n; ++j) s[j] += qc * row[j];
  }
}

}  // namespace detail

// Computes rows [row_begin, row_end) of head slice `bh`. Acc is the accumulation type
// (float for float inputs, double for double). Each key block is staged once (keys
// transposed, values converted to Acc) and shared by all rows of the range.
// kD / kDv > 0 promise shape.d == kD / shape.dv == kDv (loops then have fixed trip counts);
// 0 means "read from shape".
template <typename T, typename Acc = float, int kD = 0, int kDv = 0>
GS_KERNEL_INLINE void DgsaForwardRows(const DgsaShape& shape, const DgsaPointers<T>& ptr,
                                      int64_t bh, int64_t row_begin, int64_t row_end) {
  const int64_t d = kD > 0 ? kD : shape.d, dv = kDv > 0 ? kDv : shape.dv;
  const int64_t nk = shape.nk, rows = row_end - row_begin;
  if (rows <= 0) return;
  const Acc scale = static_cast<Acc>(shape.scale);
  const T* keys[2] = {ptr.k_pos + bh * nk * d, ptr.k_neg + bh * nk * d};
  const T* queries[2] = {ptr.q_pos + (bh * shape.nq + row_begin) * d,
                         ptr.q_neg + (bh * shape.nq + row_begin) * d};
  const T* v = ptr.v + bh * nk * dv;

  // Scaled queries of both branches, running states and accumulators of every row.
  std::vector<Acc> q(2 * rows * d), acc(2 * rows * dv, Acc(0));
  std::vector<detail::BranchState<Acc>> state(2 * rows);
  for (int b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < rows * d; ++i) {
      q[b * rows * d + i] = static_cast<Acc>(queries[b][i]) * scale;
    }
  }
  std::vector<Acc> kt(d * kKeyBlock), vb(kKeyBlock * dv), s(kKeyBlock), p(kKeyBlock);
  for (int64_t j0 = 0; j0 < nk; j0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, nk - j0);
    for (int64_t i = 0; i < n * dv; ++i) vb[i] = static_cast<Acc>(v[j0 * dv + i]);
    for (int b = 0; b < 2; ++b) {
      const T* kb = keys[b] + j0 * d;
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t c = 0; c < d; ++c) kt[c * kKeyBlock + j] = static_cast<Acc>(kb[j * d + c]);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t slot = b * rows + r;
        detail::BlockScores<Acc, kD>(q.data() + slot * d, kt.data(), n, d, s.data());
        detail::FoldBlock<Acc, kDv>(s.data(), n, vb.data(), dv, state[slot], acc.data() + slot * dv,
                          p.data());
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = bh * shape.nq + row_begin + r;
    const Acc g = static_cast<Acc>(ptr.gate[row]);
    const Acc wp = g / state[r].sum;
    const Acc wn = (Acc(1) - g) / state[rows + r].sum;
    const Acc* ap = acc.data() + r * dv;
    const Acc* an = acc.data() + (rows + r) * dv;
    T* o = ptr.out + row * dv;
    for (int64_t c = 0; c < dv; ++c) o[c] = static_cast<T>(wp * ap[c] - wn * an[c]);
  }
}

// Whole problem on the calling thread (used by kernel tests as the CPU reference).
template <typename T, typename Acc = float>
void DgsaForward(const DgsaShape& shape, const DgsaPointers<T>& ptr) {
  for (int64_t bh = 0; bh < shape.batch_heads; ++bh) {
    DgsaForwardRows<T, Acc>(shape, ptr, bh, 0, shape.nq);
  }
}

}  // namespace gatescope::ops
