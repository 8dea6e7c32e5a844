// Streaming CPU kernel of the fused PLuG attention forward (torch-free, header-only).
//
// Keys and gate keys are first packed once (converted and transposed per key block; O(M d)
// memory). One task owns a block of query rows of one batch element and all of its heads.
// Keys are visited in blocks of kKeyBlock: per block the head-shared gate factor 1 + G of every
// (row, key) pair of the task is computed once (rows x kKeyBlock values) and then used by
// every head, whose rows each keep a running (max, sum, accumulator) triple. No N x N map
// (logits, R or G) is ever held. Memory per task: O(heads * rows * (d + dv) + rows * dg +
// kKeyBlock * (rows + dv)). Thread-safe for disjoint (batch, row-range) slices.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gatescope/ops/online_softmax.h"
#include "gatescope/ops/plug_shape.h"

namespace gatescope::ops {
namespace detail {

// tanh with the vectorisable exp: sign(x) (1 - e^{-2|x|}) / (1 + e^{-2|x|}), and an odd
// Taylor polynomial below |x| = 1/16 where that quotient would lose the small values
// (absolute error about 1e-7 either way). Saturates to +-1 for large |x| (also for inf).
GS_KERNEL_INLINE float GateTanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float t = VecExp(-2.0f * ax);  // exactly 0 once -2|x| < -87
  const float big = (1.0f - t) / (1.0f + t);
  const float x2 = ax * ax;
  const float small =
      ax * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * -0.053968254f)));
  const float y = ax < 0.0625f ? small : big;
  return x < 0.0f ? -y : y;
}
GS_KERNEL_INLINE double GateTanh(double x) { return std::tanh(x); }

// f[j] = 1 + G(r[j]) for j < n, with r[j] already multiplied by gate_scale.
template <typename Acc>
GS_KERNEL_INLINE void GateFactors(const Acc* __restrict__ r, int64_t n, Acc wa, Acc ba, Acc wb,
                                  Acc bb, bool tanh_gate, Acc* __restrict__ f) {
  if (tanh_gate) {
    for (int64_t j = 0; j < n; ++j) f[j] = Acc(1) + GateTanh((wa * r[j] + ba) * (wb * r[j] + bb));
  } else {
    for (int64_t j = 0; j < n; ++j) f[j] = Acc(1) + (wa * r[j] + ba) * (wb * r[j] + bb);
  }
}

// s[j] = <x, k_j> for a transposed, zero-padded key block kt[c * kKeyBlock + j] (all
// kKeyBlock columns readable), like BlockScores. With its runtime n, BlockScores keeps the
// sums in memory and reloads and stores them at every c; for float, the sums of
// kDotVectors * kVec keys at a time are held in explicit kVec-wide vectors (GCC vector
// extensions) across the whole contraction instead, over the full block (padding columns
// give 0 and are never read). kVec should be the instruction set's float width (8 for
// AVX2, 4 for SSE: wider generic vectors are lowered through memory). double uses
// BlockScores.
inline constexpr int kDotVectors = 8;

template <typename Acc, int kLen, int kVec>
GS_KERNEL_INLINE void TileDots(const Acc* __restrict__ x, const Acc* __restrict__ kt, int64_t n,
                               int64_t len_runtime, Acc* __restrict__ s) {
#if defined(__GNUC__)
  if constexpr (std::is_same_v<Acc, float>) {
    // Unaligned kVec-float views (GCC vector types may alias their element type).
    typedef float Vec __attribute__((vector_size(kVec * sizeof(float)), aligned(4)));
    constexpr int64_t kChunk = kDotVectors * kVec;
    static_assert(kKeyBlock % kChunk == 0, "key blocks are whole chunks");
    const int64_t len = kLen > 0 ? kLen : len_runtime;
    for (int64_t j0 = 0; j0 < kKeyBlock; j0 += kChunk) {
      Vec sums[kDotVectors];
      for (int u = 0; u < kDotVectors; ++u) sums[u] = Vec{};
      for (int64_t c = 0; c < len; ++c) {
        const float xc = x[c];
        const Vec* row = reinterpret_cast<const Vec*>(kt + c * kKeyBlock + j0);
        for (int u = 0; u < kDotVectors; ++u) sums[u] += xc * row[u];
      }
      for (int u = 0; u < kDotVectors; ++u) reinterpret_cast<Vec*>(s + j0)[u] = sums[u];
    }
    return;
  }
#endif
  BlockScores<Acc, kLen>(x, kt, n, len_runtime, s);
}

}  // namespace detail

// Keys and gate keys converted to Acc and transposed per key block once per call, so the
// row tasks (several per head) do not each restage them:
//   keys:      [batch * heads][key_blocks][d][kKeyBlock]
//   gate_keys: [batch][key_blocks][dg][kKeyBlock]
// with key_blocks = ceil(nk / kKeyBlock) and the tail of the last block zero-filled.
template <typename Acc>
struct PlugPackedKeys {
  const Acc* keys = nullptr;
  const Acc* gate_keys = nullptr;
};

inline int64_t PlugKeyBlocks(int64_t nk) { return (nk + kKeyBlock - 1) / kKeyBlock; }

// Transposes the rows src[nk][len] into dst[key_blocks][len][kKeyBlock] (one slice of
// PlugPackedKeys).
template <typename T, typename Acc>
void PlugPackTransposed(const T* src, int64_t nk, int64_t len, Acc* dst) {
  const int64_t blocks = PlugKeyBlocks(nk);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    Acc* out = dst + blk * len * kKeyBlock;
    const int64_t j0 = blk * kKeyBlock, n = std::min(kKeyBlock, nk - j0);
    for (int64_t j = 0; j < n; ++j) {
      const T* row = src + (j0 + j) * len;
      for (int64_t c = 0; c < len; ++c) out[c * kKeyBlock + j] = static_cast<Acc>(row[c]);
    }
    for (int64_t j = n; j < kKeyBlock; ++j) {
      for (int64_t c = 0; c < len; ++c) out[c * kKeyBlock + j] = Acc(0);
    }
  }
}

// Slice `slice` of the packed keys: slices [0, batch * heads) are the heads' keys, slices
// [batch * heads, batch * (heads + 1)) the batch elements' gate keys. Thread-safe for
// distinct slices; packed_keys / packed_gate_keys are the two arrays of PlugPackedKeys.
template <typename T, typename Acc>
void PlugPackSlice(const PlugShape& shape, const PlugPointers<T>& ptr, int64_t slice,
                   Acc* packed_keys, Acc* packed_gate_keys) {
  const int64_t blocks = PlugKeyBlocks(shape.nk), heads = shape.batch * shape.heads;
  if (slice < heads) {
    PlugPackTransposed(ptr.k + slice * shape.nk * shape.d, shape.nk, shape.d,
                       packed_keys + slice * blocks * shape.d * kKeyBlock);
  } else {
    const int64_t b = slice - heads;
    PlugPackTransposed(ptr.k_gate + b * shape.nk * shape.dg, shape.nk, shape.dg,
                       packed_gate_keys + b * blocks * shape.dg * kKeyBlock);
  }
}

// Computes rows [row_begin, row_end) of every head of batch element `batch`, given the
// packed keys of the same problem. Acc is the accumulation type (float for float inputs,
// double for double). kD / kDv / kDg > 0 promise shape.d == kD / shape.dv == kDv /
// shape.dg == kDg (fixed trip counts); 0 means "read from shape". kVec is the float vector
// width of the caller's instruction set (see TileDots; 4 suits any 128-bit SIMD).
template <typename T, typename Acc = float, int kD = 0, int kDv = 0, int kDg = 0, int kVec = 4>
GS_KERNEL_INLINE void PlugForwardRows(const PlugShape& shape, const PlugPointers<T>& ptr,
                                      const PlugPackedKeys<Acc>& packed, int64_t batch,
                                      int64_t row_begin, int64_t row_end) {
  const int64_t d = kD > 0 ? kD : shape.d, dv = kDv > 0 ? kDv : shape.dv;
  const int64_t dg = kDg > 0 ? kDg : shape.dg;
  const int64_t heads = shape.heads, nq = shape.nq, nk = shape.nk;
  const int64_t rows = row_end - row_begin;
  if (rows <= 0) return;
  const Acc scale = static_cast<Acc>(shape.scale);
  const Acc gate_scale = static_cast<Acc>(shape.gate_scale);
  const Acc wa = static_cast<Acc>(shape.w_a), ba = static_cast<Acc>(shape.b_a);
  const Acc wb = static_cast<Acc>(shape.w_b), bb = static_cast<Acc>(shape.b_b);

  // Scaled queries [heads][rows][d], scaled gate queries [rows][dg], per-head row states.
  std::vector<Acc> q(heads * rows * d), qg(rows * dg), acc(heads * rows * dv, Acc(0));
  std::vector<detail::BranchState<Acc>> state(heads * rows);
  for (int64_t h = 0; h < heads; ++h) {
    const T* src = ptr.q + ((batch * heads + h) * nq + row_begin) * d;
    Acc* dst = q.data() + h * rows * d;
    for (int64_t i = 0; i < rows * d; ++i) dst[i] = static_cast<Acc>(src[i]) * scale;
  }
  {
    const T* src = ptr.q_gate + (batch * nq + row_begin) * dg;
    for (int64_t i = 0; i < rows * dg; ++i) qg[i] = static_cast<Acc>(src[i]) * gate_scale;
  }
  const int64_t blocks = PlugKeyBlocks(nk);

  // Per key block: the gate factors of all rows, and (unless T is Acc) one head's values.
  std::vector<Acc> factor(rows * kKeyBlock), vb(std::is_same_v<T, Acc> ? 0 : kKeyBlock * dv),
      r(kKeyBlock), s(kKeyBlock), p(kKeyBlock);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kKeyBlock, n = std::min(kKeyBlock, nk - j0);
    const Acc* kgt = packed.gate_keys + (batch * blocks + blk) * dg * kKeyBlock;
    // R and G once per (row block, key block), shared by all heads.
    for (int64_t row = 0; row < rows; ++row) {
      detail::TileDots<Acc, kDg, kVec>(qg.data() + row * dg, kgt, n, dg, r.data());
      detail::GateFactors(r.data(), n, wa, ba, wb, bb, shape.tanh_gate,
                          factor.data() + row * kKeyBlock);
    }
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t bh = batch * heads + h;
      const Acc* kt = packed.keys + (bh * blocks + blk) * d * kKeyBlock;
      const T* values = ptr.v + (bh * nk + j0) * dv;
      const Acc* vals;
      if constexpr (std::is_same_v<T, Acc>) {
        vals = values;
      } else {
        for (int64_t i = 0; i < n * dv; ++i) vb[i] = static_cast<Acc>(values[i]);
        vals = vb.data();
      }
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t slot = h * rows + row;
        detail::TileDots<Acc, kD, kVec>(q.data() + slot * d, kt, n, d, s.data());
        const Acc* f = factor.data() + row * kKeyBlock;
        for (int64_t j = 0; j < n; ++j) s[j] *= f[j];
        detail::FoldBlock<Acc, kDv>(s.data(), n, vals, dv, state[slot],
                                    acc.data() + slot * dv, p.data());
      }
    }
  }
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t slot = h * rows + row;
      // sum == 0 only without keys (nk == 0): the row is then 0.
      const Acc w = state[slot].sum > Acc(0) ? Acc(1) / state[slot].sum : Acc(0);
      T* o = ptr.out + ((batch * heads + h) * nq + row_begin + row) * dv;
      const Acc* a = acc.data() + slot * dv;
      for (int64_t c = 0; c < dv; ++c) o[c] = static_cast<T>(w * a[c]);
    }
  }
}

// Whole problem on the calling thread (used by kernel tests as the CPU reference).
template <typename T, typename Acc = float>
void PlugForward(const PlugShape& shape, const PlugPointers<T>& ptr) {
  const int64_t blocks = PlugKeyBlocks(shape.nk);
  std::vector<Acc> keys(shape.batch * shape.heads * blocks * shape.d * kKeyBlock),
      gate_keys(shape.batch * blocks * shape.dg * kKeyBlock);
  for (int64_t slice = 0; slice < shape.batch * (shape.heads + 1); ++slice) {
    PlugPackSlice(shape, ptr, slice, keys.data(), gate_keys.data());
  }
  const PlugPackedKeys<Acc> packed{keys.data(), gate_keys.data()};
  for (int64_t b = 0; b < shape.batch; ++b) {
    PlugForwardRows<T, Acc>(shape, ptr, packed, b, 0, shape.nq);
  }
}

}  // namespace gatescope::ops
