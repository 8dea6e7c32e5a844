// CPU kernel of the fused gated differential linear attention (GDLA) forward (torch-free,
// header-only).
//
// Two passes per head slice. GdlaAccumulateSummary adds a range of key tokens to the
// slice's key summary (GdlaSummarySize(dim) values, laid out as in gdla_shape.h), so the
// summary may be built from disjoint token ranges and summed. GdlaForwardRows then turns
// each token row into its output using only the finished summary: two dim-wide feature
// projections, the normalisation and the gate. No n x n map exists; memory per call is the
// summary plus O(kGdlaKeyGroup * dim) scratch. Thread-safe for disjoint summaries and
// disjoint row ranges.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gatescope/ops/gdla_shape.h"
#include "gatescope/ops/online_softmax.h"  // GS_KERNEL_INLINE, detail::VecExp

namespace gatescope::ops {

// Keys added to the summary per sweep over it: each summary entry is loaded and stored
// once per group of keys rather than once per key.
inline constexpr int64_t kGdlaKeyGroup = 8;

namespace detail {

// phi(x) = ELU(x) + 1. Both sides are computed so a loop over it stays branch-free (it
// vectorises when built with -fno-trapping-math, as the op library is).
template <typename Acc>
GS_KERNEL_INLINE Acc EluFeature(Acc x) {
  const Acc e = VecExp(x < Acc(0) ? x : Acc(0));
  return x <= Acc(0) ? e : x + Acc(1);  // NaN takes x + 1 and stays NaN
}

// 1 / (1 + e^-x) with the vectorisable exp; |x| beyond 80 saturates.
template <typename Acc>
GS_KERNEL_INLINE Acc GdlaSigmoid(Acc x) {
  x = x < Acc(-80) ? Acc(-80) : (x > Acc(80) ? Acc(80) : x);
  return Acc(1) / (Acc(1) + VecExp(-x));
}

#if defined(__GNUC__)
// Eight Acc values as one GCC/Clang vector: one AVX register of floats in an AVX2 build,
// split over narrower registers otherwise.
template <typename Acc>
struct EightLanes;
template <>
struct EightLanes<float> {
  typedef float type __attribute__((vector_size(8 * sizeof(float))));
};
template <>
struct EightLanes<double> {
  typedef double type __attribute__((vector_size(8 * sizeof(double))));
};
#endif

// Both branches' features projected through their halves of the summary (d = dim / 2):
//   a1[c] = sum_{i < d} f[i] s[i][c],   a2[c] = sum_{i < d} f[d + i] s[d + i][c].
// With GCC/Clang, columns go in blocks of 16, each branch's block held in two explicit
// 8-lane vectors, so the four accumulators stay in registers over the whole i loop as
// independent chains (auto-vectorisation keeps such accumulators in memory or vectorises
// over i instead).
template <typename Acc, int kDim>
GS_KERNEL_INLINE void ProjectFeatures(const Acc* __restrict__ f, const Acc* __restrict__ s,
                                      int64_t dim_runtime, Acc* __restrict__ a1,
                                      Acc* __restrict__ a2) {
  const int64_t dim = kDim > 0 ? kDim : dim_runtime, d = dim / 2;
  const Acc* s2 = s + d * dim;
  int64_t c0 = 0;
#if defined(__GNUC__)
  using Lanes = typename EightLanes<Acc>::type;
  constexpr int64_t kWidth = 8;
  Lanes v[4];
  for (; c0 + 2 * kWidth <= dim; c0 += 2 * kWidth) {
    Lanes acc[4] = {};
    for (int64_t i = 0; i < d; ++i) {
      std::memcpy(&v[0], s + i * dim + c0, sizeof(Lanes));
      std::memcpy(&v[1], s + i * dim + c0 + kWidth, sizeof(Lanes));
      std::memcpy(&v[2], s2 + i * dim + c0, sizeof(Lanes));
      std::memcpy(&v[3], s2 + i * dim + c0 + kWidth, sizeof(Lanes));
      acc[0] += f[i] * v[0];
      acc[1] += f[i] * v[1];
      acc[2] += f[d + i] * v[2];
      acc[3] += f[d + i] * v[3];
    }
    std::memcpy(a1 + c0, &acc[0], sizeof(Lanes));
    std::memcpy(a1 + c0 + kWidth, &acc[1], sizeof(Lanes));
    std::memcpy(a2 + c0, &acc[2], sizeof(Lanes));
    std::memcpy(a2 + c0 + kWidth, &acc[3], sizeof(Lanes));
  }
  for (; c0 + kWidth <= dim; c0 += kWidth) {
    Lanes acc[2] = {};
    for (int64_t i = 0; i < d; ++i) {
      std::memcpy(&v[0], s + i * dim + c0, sizeof(Lanes));
      std::memcpy(&v[2], s2 + i * dim + c0, sizeof(Lanes));
      acc[0] += f[i] * v[0];
      acc[1] += f[d + i] * v[2];
    }
    std::memcpy(a1 + c0, &acc[0], sizeof(Lanes));
    std::memcpy(a2 + c0, &acc[1], sizeof(Lanes));
  }
#endif
  for (; c0 < dim; ++c0) {
    Acc acc1 = 0, acc2 = 0;
    for (int64_t i = 0; i < d; ++i) {
      acc1 += f[i] * s[i * dim + c0];
      acc2 += f[d + i] * s2[i * dim + c0];
    }
    a1[c0] = acc1;
    a2[c0] = acc2;
  }
}

// sum_i x[i] y[i] in kLanes independent chains, so the reduction vectorises.
template <typename Acc>
GS_KERNEL_INLINE Acc Dot(const Acc* x, const Acc* y, int64_t n) {
  constexpr int kLanes = 8;
  Acc lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = Acc(0);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += x[i + l] * y[i + l];
  }
  Acc total = 0;
  for (; i < n; ++i) total += x[i] * y[i];
  for (int l = 0; l < kLanes; ++l) total += lane[l];
  return total;
}

}  // namespace detail

// Adds key tokens [m_begin, m_end) of head slice `bh` (= batch * heads + head) to
// `summary` (GdlaSummarySize(dim) values of Acc; the caller zeroes it before the first
// range). kDim > 0 promises shape.dim == kDim (fixed trip counts); 0 reads it from shape.
template <typename T, typename Acc = float, int kDim = 0>
GS_KERNEL_INLINE void GdlaAccumulateSummary(const GdlaShape& shape, const GdlaPointers<T>& ptr,
                                            int64_t bh, int64_t m_begin, int64_t m_end,
                                            Acc* summary) {
  const int64_t dim = kDim > 0 ? kDim : shape.dim;
  if (m_end <= m_begin) return;
  constexpr int64_t kGroup = kGdlaKeyGroup;
  const T* keys = ptr.k + bh * shape.n * dim;
  const T* values = ptr.v + bh * shape.n * dim;
  Acc* kv = summary;
  Acc* z = summary + dim * dim;
  // One group of keys: features fk[j * dim + f] and values vb[j * dim + c], zero past m_end
  // so a short last group adds exact zeros.
  std::vector<Acc> fk(kGroup * dim), vb(kGroup * dim);
  for (int64_t m0 = m_begin; m0 < m_end; m0 += kGroup) {
    const int64_t n = std::min(kGroup, m_end - m0);
    for (int64_t j = 0; j < kGroup; ++j) {
      const T* kr = keys + (m0 + j) * dim;
      const T* vr = values + (m0 + j) * dim;
      Acc* fkj = fk.data() + j * dim;
      Acc* vbj = vb.data() + j * dim;
      if (j < n) {
        for (int64_t f = 0; f < dim; ++f) fkj[f] = detail::EluFeature(static_cast<Acc>(kr[f]));
        for (int64_t c = 0; c < dim; ++c) vbj[c] = static_cast<Acc>(vr[c]);
      } else {
        for (int64_t f = 0; f < dim; ++f) fkj[f] = Acc(0);
        for (int64_t c = 0; c < dim; ++c) vbj[c] = Acc(0);
      }
    }
    const Acc* vbp = vb.data();
    for (int64_t f = 0; f < dim; ++f) {
      Acc a[kGroup];
      Acc feature_sum = 0;
      for (int64_t j = 0; j < kGroup; ++j) {
        a[j] = fk[j * dim + f];
        feature_sum += a[j];
      }
      z[f] += feature_sum;
      Acc* row = kv + f * dim;
      for (int64_t c = 0; c < dim; ++c) {
        Acc s = row[c];
        for (int64_t j = 0; j < kGroup; ++j) s += a[j] * vbp[j * dim + c];
        row[c] = s;
      }
    }
  }
}

// Computes token rows [row_begin, row_end) of head slice `bh` from the slice's finished
// key summary. kDim as above.
template <typename T, typename Acc = float, int kDim = 0>
GS_KERNEL_INLINE void GdlaForwardRows(const GdlaShape& shape, const GdlaPointers<T>& ptr,
                                      const Acc* summary, int64_t bh, int64_t row_begin,
                                      int64_t row_end) {
  const int64_t dim = kDim > 0 ? kDim : shape.dim, d = dim / 2;
  if (row_end <= row_begin) return;
  const int64_t head = bh % shape.heads;
  const Acc* kv = summary;
  const Acc* z = summary + dim * dim;
  const Acc eps = static_cast<Acc>(shape.eps);
  const Acc linear_eps = static_cast<Acc>(kGdlaLinearEps);
  const Acc inv_dim = Acc(1) / static_cast<Acc>(dim);
  // This head's lambda and the norm weight in Acc, and per-row scratch.
  std::vector<Acc> lam(dim), weight(dim), fq(dim), a1(dim), a2(dim), y(dim);
  for (int64_t c = 0; c < dim; ++c) {
    lam[c] = static_cast<Acc>(ptr.lam[head * dim + c]);
    weight[c] = ptr.norm_weight ? static_cast<Acc>(ptr.norm_weight[c]) : Acc(1);
  }
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t row = bh * shape.n + r;
    const T* qr = ptr.q + row * dim;
    const T* gr = ptr.g + row * dim;
    T* o = ptr.out + row * dim;
    for (int64_t f = 0; f < dim; ++f) fq[f] = detail::EluFeature(static_cast<Acc>(qr[f]));
    const Acc den1 = detail::Dot(fq.data(), z, d) + linear_eps;
    const Acc den2 = detail::Dot(fq.data() + d, z + d, d) + linear_eps;
    detail::ProjectFeatures<Acc, kDim>(fq.data(), kv, dim, a1.data(), a2.data());
    const Acc w1 = Acc(1) / den1, w2 = Acc(1) / den2;
    for (int64_t c = 0; c < dim; ++c) y[c] = a1[c] * w1 - lam[c] * (a2[c] * w2);
    const Acc scale = Acc(1) / std::sqrt(detail::Dot(y.data(), y.data(), dim) * inv_dim + eps);
    for (int64_t c = 0; c < dim; ++c) y[c] *= scale * weight[c];
    switch (shape.gate) {
      case GdlaGate::kSigmoid:
        for (int64_t c = 0; c < dim; ++c) {
          o[c] = static_cast<T>(y[c] * detail::GdlaSigmoid(static_cast<Acc>(gr[c])));
        }
        break;
      case GdlaGate::kSilu:
        for (int64_t c = 0; c < dim; ++c) {
          const Acc g = static_cast<Acc>(gr[c]);
          o[c] = static_cast<T>(y[c] * (g * detail::GdlaSigmoid(g)));
        }
        break;
      case GdlaGate::kNone:
        for (int64_t c = 0; c < dim; ++c) o[c] = static_cast<T>(y[c]);
        break;
    }
  }
}

// Whole problem on the calling thread (used by kernel tests as the CPU reference).
template <typename T, typename Acc = float>
void GdlaForward(const GdlaShape& shape, const GdlaPointers<T>& ptr) {
  std::vector<Acc> summary(GdlaSummarySize(shape.dim));
  for (int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    std::fill(summary.begin(), summary.end(), Acc(0));
    GdlaAccumulateSummary<T, Acc>(shape, ptr, bh, 0, shape.n, summary.data());
    GdlaForwardRows<T, Acc>(shape, ptr, summary.data(), bh, 0, shape.n);
  }
}

}  // namespace gatescope::ops
