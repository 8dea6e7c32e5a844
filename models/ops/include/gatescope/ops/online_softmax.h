// Online-softmax building blocks shared by the streaming CPU attention kernels
// (torch-free, header-only): fast vectorisable exp, per-row running state, and the fold of
// one key block into a row's accumulator. Stateless; thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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
// x in [-87, 88]). Inputs below -87 (masked keys hold -inf) give exactly 0; inputs above
// 88 are clamped.
GS_KERNEL_INLINE float VecExp(float x) {
  const float keep = x < -87.0f ? 0.0f : 1.0f;
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
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
  return p * scale * keep;
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

}  // namespace gatescope::ops
