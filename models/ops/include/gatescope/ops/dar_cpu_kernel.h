// Streaming CPU kernel of the fused DAR attention forward (torch-free, header-only).
//
// Like the M-DGSA kernel, each query row keeps one running (max, sum, accumulator) triple
// and visits keys in blocks of kKeyBlock; the cosine comes from the same dot product
// divided by the two norms, so no N x N map (logits, cosines or resonance) is ever held.
// Memory per call: O(rows * d + kKeyBlock * (d + dv)). Thread-safe for disjoint
// (head, row-range) slices.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gatescope/ops/dar_shape.h"
#include "gatescope/ops/online_softmax.h"

namespace gatescope::ops {
namespace detail {

// 1 / (1 + e^-x) with the vectorisable exp; |x| beyond 80 saturates to 0 or 1.
template <typename Acc>
GS_KERNEL_INLINE Acc Sigmoid(Acc x) {
  x = x < Acc(-80) ? Acc(-80) : (x > Acc(80) ? Acc(80) : x);
  return Acc(1) / (Acc(1) + VecExp(-x));
}

template <typename Acc>
GS_KERNEL_INLINE Acc InverseNorm(const Acc* x, int64_t d) {
  Acc ss = 0;
  for (int64_t c = 0; c < d; ++c) ss += x[c] * x[c];
  return Acc(1) / (std::sqrt(ss) + static_cast<Acc>(kDarNormEps));
}

}  // namespace detail

// Computes rows [row_begin, row_end) of head slice `bh` (= batch * heads + head).
template <typename T, typename Acc = float, int kD = 0, int kDv = 0>
GS_KERNEL_INLINE void DarForwardRows(const DarShape& shape, const DarPointers<T>& ptr,
                                     int64_t bh, int64_t row_begin, int64_t row_end) {
  const int64_t d = kD > 0 ? kD : shape.d, dv = kDv > 0 ? kDv : shape.dv;
  const int64_t nk = shape.nk, rows = row_end - row_begin;
  if (rows <= 0) return;
  const Acc scale = static_cast<Acc>(shape.scale);
  const Acc lam = shape.lam, rho = shape.rho, alpha = shape.alpha, beta = shape.beta;
  const Acc neg_inf = -std::numeric_limits<Acc>::infinity();
  const T* keys = ptr.k + bh * nk * d;
  const T* queries = ptr.q + (bh * shape.nq + row_begin) * d;
  const T* v = ptr.v + bh * nk * dv;
  const uint8_t* mask = ptr.key_mask ? ptr.key_mask + (bh / shape.heads) * nk : nullptr;

  // Per row: scaled query, the factor turning a scaled score into a cosine, counters.
  std::vector<Acc> q(rows * d), cos_factor(rows), acc(rows * dv, Acc(0));
  std::vector<detail::BranchState<Acc>> state(rows);
  std::vector<Acc> crossings(rows, Acc(0)), visible(rows, Acc(0));
  for (int64_t r = 0; r < rows; ++r) {
    Acc* qr = q.data() + r * d;
    for (int64_t c = 0; c < d; ++c) qr[c] = static_cast<Acc>(queries[r * d + c]);
    cos_factor[r] = detail::InverseNorm(qr, d) / scale;
    for (int64_t c = 0; c < d; ++c) qr[c] *= scale;
  }
  std::vector<Acc> kt(d * kKeyBlock), vb(kKeyBlock * dv), inv_k(kKeyBlock), s(kKeyBlock),
      p(kKeyBlock), key_row(d);
  std::vector<uint8_t> key_ok(kKeyBlock);
  for (int64_t j0 = 0; j0 < nk; j0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, nk - j0);
    for (int64_t i = 0; i < n * dv; ++i) vb[i] = static_cast<Acc>(v[j0 * dv + i]);
    for (int64_t j = 0; j < n; ++j) {
      const T* kj = keys + (j0 + j) * d;
      for (int64_t c = 0; c < d; ++c) {
        key_row[c] = static_cast<Acc>(kj[c]);
        kt[c * kKeyBlock + j] = key_row[c];
      }
      inv_k[j] = detail::InverseNorm(key_row.data(), d);
      key_ok[j] = mask == nullptr || mask[j0 + j] != 0;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = row_begin + r;
      // Keys past the row are invisible under the causal mask.
      const int64_t limit = shape.causal ? std::min(n, std::max<int64_t>(row - j0 + 1, 0)) : n;
      detail::BlockScores<Acc, kD>(q.data() + r * d, kt.data(), n, d, s.data());
      int64_t seen = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (j >= limit || !key_ok[j]) {
          s[j] = neg_inf;
          continue;
        }
        ++seen;
        const Acc c = s[j] * cos_factor[r] * inv_k[j];
        crossings[r] += c > rho ? Acc(1) : Acc(0);
        if (lam != Acc(0)) {
          Acc res = 0;
          for (int t = 0; t < shape.steps; ++t) res = detail::Sigmoid(alpha * (c + beta * res - rho));
          s[j] += lam * res;
        }
      }
      visible[r] += static_cast<Acc>(seen);
      if (seen == 0) continue;  // nothing to fold (keeps a fully masked row's state empty)
      detail::FoldBlock<Acc, kDv>(s.data(), n, vb.data(), dv, state[r], acc.data() + r * dv,
                                  p.data());
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = bh * shape.nq + row_begin + r;
    const Acc w = state[r].sum > Acc(0) ? Acc(1) / state[r].sum : Acc(0);
    T* o = ptr.out + row * dv;
    for (int64_t c = 0; c < dv; ++c) o[c] = static_cast<T>(w * acc[r * dv + c]);
    ptr.row_stats[2 * row] = static_cast<float>(crossings[r]);
    ptr.row_stats[2 * row + 1] = static_cast<float>(visible[r]);
  }
}

// Whole problem on the calling thread (used by kernel tests as the CPU reference).
template <typename T, typename Acc = float>
void DarForward(const DarShape& shape, const DarPointers<T>& ptr) {
  for (int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    DarForwardRows<T, Acc>(shape, ptr, bh, 0, shape.nq);
  }
}

}  // namespace gatescope::ops
