// Streaming CPU kernel of the fused M-DGSA forward (torch-free, header-only).
//
// Each query row keeps two running (max, sum, accumulator) triples, one per branch, and
// visits keys in blocks of kKeyBlock; no N x N map is ever held. Memory per call is
// O(rows * (d + dv) + kKeyBlock * (d + dv)). Thread-safe: callers may run disjoint (head, row-range) slices in parallel.
//
// With a key mask only the visible keys of each block are staged (gathered to the front),
// so hidden keys cost no arithmetic, a block without visible keys is skipped, and a batch
// entry padded at the end gives the same blocks as the unpadded sequence. A row that sees
// no key keeps sum = 0 and is written as 0. Without a mask the staging is the plain copy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gatescope/ops/dgsa_shape.h"
#include "gatescope/ops/online_softmax.h"

namespace gatescope::ops {

// Computes rows [row_begin, row_end) of head slice `bh`. Acc is the accumulation type
// (float for float inputs, double for double). Each key block is staged once (keys
// transposed, values converted to Acc) and shared by all rows of the range. ptr.key_mask
// (optional) is indexed by batch = bh / shape.heads.
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
  const uint8_t* mask = ptr.key_mask ? ptr.key_mask + (bh / shape.heads) * nk : nullptr;

  // Scaled queries of both branches, running states and accumulators of every row.
  std::vector<Acc> q(2 * rows * d), acc(2 * rows * dv, Acc(0));
  std::vector<detail::BranchState<Acc>> state(2 * rows);
  for (int b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < rows * d; ++i) {
      q[b * rows * d + i] = static_cast<Acc>(queries[b][i]) * scale;
    }
  }
  std::vector<Acc> kt(d * kKeyBlock), vb(kKeyBlock * dv), s(kKeyBlock), p(kKeyBlock);
  std::vector<int64_t> visible(mask ? kKeyBlock : 0);  // visible keys of the block
  for (int64_t j0 = 0; j0 < nk; j0 += kKeyBlock) {
    int64_t n = std::min(kKeyBlock, nk - j0);
    if (mask != nullptr) {
      int64_t m = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (mask[j0 + j] != 0) visible[m++] = j0 + j;
      }
      if (m == 0) continue;  // nothing visible: the block would add nothing
      n = m;
      for (int64_t j = 0; j < n; ++j) {
        const T* vj = v + visible[j] * dv;
        for (int64_t c = 0; c < dv; ++c) vb[j * dv + c] = static_cast<Acc>(vj[c]);
      }
    } else {
      for (int64_t i = 0; i < n * dv; ++i) vb[i] = static_cast<Acc>(v[j0 * dv + i]);
    }
    for (int b = 0; b < 2; ++b) {
      if (mask != nullptr) {
        for (int64_t j = 0; j < n; ++j) {
          const T* kj = keys[b] + visible[j] * d;
          for (int64_t c = 0; c < d; ++c) kt[c * kKeyBlock + j] = static_cast<Acc>(kj[c]);
        }
      } else {
        const T* kb = keys[b] + j0 * d;
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t c = 0; c < d; ++c) kt[c * kKeyBlock + j] = static_cast<Acc>(kb[j * d + c]);
        }
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
    // sum = 0 only for a row without visible keys (its accumulators are 0 too).
    const Acc wp = state[r].sum > Acc(0) ? g / state[r].sum : Acc(0);
    const Acc wn = state[rows + r].sum > Acc(0) ? (Acc(1) - g) / state[rows + r].sum : Acc(0);
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
