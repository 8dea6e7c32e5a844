// CPU kernel of the multi-scale deformable attention forward (torch-free, header-only).
//
// For one batch item and a range of queries, each (query, head) keeps a channels-wide
// accumulator and adds, for every level and point, the attention weight times the
// bilinear weight times each in-map neighbour's channel row (contiguous in value). No
// per-level sampled tensor ([batch * heads, channels, queries, points] per level, as in the
// grid_sample formulation) is ever built. Memory per call: one accumulator of `channels`
// values. Thread-safe for disjoint (batch item, query range) slices.
#pragma once

#include <cstdint>
#include <vector>

#include "gatescope/ops/ms_deform_shape.h"
#include "gatescope/ops/online_softmax.h"  // GS_KERNEL_INLINE

namespace gatescope::ops {

// Computes out[n, q, :, :] for queries [query_begin, query_end) of batch item n. kD > 0
// fixes the channel count at compile time (it must then equal shape.channels).
template <typename T, typename Acc = T, int kD = 0>
GS_KERNEL_INLINE void MsDeformForwardQueries(const MsDeformShape& shape,
                                             const MsDeformPointers<T>& ptr, int64_t n,
                                             int64_t query_begin, int64_t query_end) {
  const int64_t d = kD > 0 ? kD : shape.channels;
  const int64_t heads = shape.heads, levels = shape.levels, points = shape.points;
  const int64_t pixel_stride = heads * d;  // between neighbouring pixels of one head
  const T* value_n = ptr.value + n * shape.spatial * pixel_stride;
  std::vector<Acc> acc_buffer(d);
  Acc* __restrict__ acc = acc_buffer.data();
  for (int64_t q = query_begin; q < query_end; ++q) {
    const int64_t nq = n * shape.queries + q;
    for (int64_t m = 0; m < heads; ++m) {
      const int64_t nqm = nq * heads + m;
      const T* loc = ptr.sampling_locations + nqm * levels * points * 2;
      const T* attn = ptr.attention_weights + nqm * levels * points;
      for (int64_t c = 0; c < d; ++c) acc[c] = Acc(0);
      for (int64_t l = 0; l < levels; ++l) {
        const int64_t h = ptr.spatial_shapes[2 * l], w = ptr.spatial_shapes[2 * l + 1];
        const T* level = value_n + ptr.level_start[l] * pixel_stride + m * d;
        for (int64_t p = 0; p < points; ++p) {
          const int64_t lp = l * points + p;
          const Acc x = static_cast<Acc>(loc[2 * lp]), y = static_cast<Acc>(loc[2 * lp + 1]);
          const Acc a = static_cast<Acc>(attn[lp]);
          MsDeformCorners<Acc> corners;
          if (!MsDeformBilinear(x, y, h, w, corners)) {
            const Acc term = MsDeformRejectedTerm(x, y, a);
            if (term != Acc(0)) {
              for (int64_t c = 0; c < d; ++c) acc[c] += term;
            }
            continue;
          }
          for (int k = 0; k < 4; ++k) {
            if (corners.pixel[k] < 0) continue;
            const Acc wk = a * corners.weight[k];
            const T* __restrict__ v = level + corners.pixel[k] * pixel_stride;
            for (int64_t c = 0; c < d; ++c) acc[c] += wk * static_cast<Acc>(v[c]);
          }
        }
      }
      T* o = ptr.out + nqm * d;
      for (int64_t c = 0; c < d; ++c) o[c] = static_cast<T>(acc[c]);
    }
  }
}

// The whole forward on one thread (tests and small problems).
template <typename T, typename Acc = T>
void MsDeformForward(const MsDeformShape& shape, const MsDeformPointers<T>& ptr) {
  for (int64_t n = 0; n < shape.batch; ++n) {
    MsDeformForwardQueries<T, Acc>(shape, ptr, n, 0, shape.queries);
  }
}

}  // namespace gatescope::ops
