// Streaming CPU kernel of the fused M-DGSA forward (torch-free, header-only).
//
// Each query row keeps two running (max, sum, accumulator) triples, one per branch, and
// visits keys in blocks of kKeyBlock; no N x N map is ever held. Memory per call is
// O(rows * dv). Thread-safe: callers may run disjoint (head, row-range) slices in parallel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gatescope/ops/dgsa_shape.h"

namespace gatescope::ops {

inline constexpr int64_t kKeyBlock = 64;

namespace detail {

// Online-softmax state of one branch for one query row.
template <typename Acc>
struct BranchState {
  Acc max = -std::numeric_limits<Acc>::infinity();
  Acc sum = 0;
};

// Folds scores s[0..n) (already scaled) of one key block into state and acc[dv].
template <typename T, typename Acc>
void FoldBlock(const Acc* s, int64_t n, const T* v, int64_t dv, BranchState<Acc>& st,
               Acc* acc, Acc* p) {
  Acc block_max = s[0];
  for (int64_t j = 1; j < n; ++j) block_max = std::max(block_max, s[j]);
  const Acc new_max = std::max(st.max, block_max);
  const Acc correction = std::exp(st.max - new_max);  // exp(-inf) = 0 on the first block
  st.sum *= correction;
  for (int64_t c = 0; c < dv; ++c) acc[c] *= correction;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = std::exp(s[j] - new_max);
    st.sum += p[j];
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* vj = v + j * dv;
    const Acc pj = p[j];
    for (int64_t c = 0; c < dv; ++c) acc[c] += pj * static_cast<Acc>(vj[c]);
  }
  st.max = new_max;
}

template <typename T, typename Acc>
void Scores(const T* q, const T* k, int64_t n, int64_t d, Acc scale, Acc* s) {
  for (int64_t j = 0; j < n; ++j) {
    const T* kj = k + j * d;
    Acc dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += static_cast<Acc>(q[c]) * static_cast<Acc>(kj[c]);
    s[j] = dot * scale;
  }
}

}  // namespace detail

// Computes rows [row_begin, row_end) of head slice `bh`. Acc is the accumulation type
// (float for float inputs, double for double).
template <typename T, typename Acc = float>
void DgsaForwardRows(const DgsaShape& shape, const DgsaPointers<T>& ptr, int64_t bh,
                     int64_t row_begin, int64_t row_end) {
  const int64_t d = shape.d, dv = shape.dv, nk = shape.nk;
  const Acc scale = static_cast<Acc>(shape.scale);
  const T* kp = ptr.k_pos + bh * nk * d;
  const T* kn = ptr.k_neg + bh * nk * d;
  const T* v = ptr.v + bh * nk * dv;
  std::vector<Acc> acc_pos(dv), acc_neg(dv), s(kKeyBlock), p(kKeyBlock);
  for (int64_t i = row_begin; i < row_end; ++i) {
    const int64_t row = bh * shape.nq + i;
    const T* qp = ptr.q_pos + row * d;
    const T* qn = ptr.q_neg + row * d;
    std::fill(acc_pos.begin(), acc_pos.end(), Acc(0));
    std::fill(acc_neg.begin(), acc_neg.end(), Acc(0));
    detail::BranchState<Acc> st_pos, st_neg;
    for (int64_t j0 = 0; j0 < nk; j0 += kKeyBlock) {
      const int64_t n = std::min(kKeyBlock, nk - j0);
      detail::Scores(qp, kp + j0 * d, n, d, scale, s.data());
      detail::FoldBlock(s.data(), n, v + j0 * dv, dv, st_pos, acc_pos.data(), p.data());
      detail::Scores(qn, kn + j0 * d, n, d, scale, s.data());
      detail::FoldBlock(s.data(), n, v + j0 * dv, dv, st_neg, acc_neg.data(), p.data());
    }
    const Acc g = static_cast<Acc>(ptr.gate[row]);
    const Acc wp = g / st_pos.sum;
    const Acc wn = (Acc(1) - g) / st_neg.sum;
    T* o = ptr.out + row * dv;
    for (int64_t c = 0; c < dv; ++c) o[c] = static_cast<T>(wp * acc_pos[c] - wn * acc_neg[c]);
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
