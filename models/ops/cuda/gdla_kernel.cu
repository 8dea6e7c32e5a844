// CUDA kernels of the fused gated differential linear attention (GDLA) forward. Need only
// the CUDA runtime.
//
// 1. GdlaSummaryKernel, grid (batch * heads, splits), kSumThreads threads: each block
//    reduces one contiguous split of the tokens of one head slice into a partial key
//    summary. The summary is held as a dim x (dim + 1) matrix E[f][c] = sum_m phi(k[m][f])
//    v'[m][c] with v' = [v | 1], i.e. the two KV_j stacked (rows f < d and f >= d) with
//    z_j as the last column. Each thread owns a fixed set of entries and accumulates them
//    over the split in registers while the block stages kSumTile tokens at a time (phi(k)
//    and v' in fp32) in shared memory.
// 2. GdlaReduceKernel (only with more than one split): sums each slice's partials in split
//    order, so the result does not depend on scheduling.
// 3. GdlaRowsKernel, grid (batch * heads, ceil(n / kRowsPerBlock)), kRowThreads threads:
//    the block loads its slice's summary into shared memory; one warp per token row, each
//    lane owning channels lane, lane + 32, ...: phi(q) of the row goes to shared memory,
//    the lanes project it through both halves of the summary, then the differential mix,
//    the RMS norm (a warp reduction), the weight and the gate, all in fp32.
// No n x n map exists; device workspace is O(slices * splits * dim^2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "gatescope/ops/gdla_cuda_kernel.h"

namespace gatescope::ops {
namespace {

constexpr int kSumThreads = 256;
constexpr int kSumTile = 32;
// A split covers at least kMinSplitTokens tokens; splits are added only until about
// kTargetSumBlocks summary blocks exist.
constexpr int64_t kMinSplitTokens = 256;
constexpr int64_t kTargetSumBlocks = 512;
constexpr int kReduceThreads = 256;
constexpr int kRowThreads = 256;
constexpr int kRowWarps = kRowThreads / 32;
constexpr int kRowsPerBlock = 64;

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ void Store(float* p, float x) { *p = x; }
__device__ __forceinline__ void Store(__half* p, float x) { *p = __float2half(x); }

// phi(x) = ELU(x) + 1.
__device__ __forceinline__ float EluFeature(float x) { return x > 0.f ? x + 1.f : expf(x); }

// Same clamp as the CPU kernel's sigmoid.
__device__ __forceinline__ float Sigmoid(float x) {
  x = fminf(fmaxf(x, -80.f), 80.f);
  return 1.f / (1.f + expf(-x));
}

struct Plan {
  int64_t slices = 0, splits = 0, split_tokens = 0, entries = 0;
};

Plan MakePlan(const GdlaShape& shape) {
  Plan p;
  p.slices = shape.batch * shape.heads;
  p.entries = shape.dim * (shape.dim + 1);
  if (p.slices <= 0 || shape.n <= 0) return p;
  const int64_t by_size = (shape.n + kMinSplitTokens - 1) / kMinSplitTokens;
  const int64_t by_occupancy = kTargetSumBlocks / p.slices > 1 ? kTargetSumBlocks / p.slices : 1;
  p.splits = by_size < by_occupancy ? by_size : by_occupancy;
  p.split_tokens = (shape.n + p.splits - 1) / p.splits;
  p.splits = (shape.n + p.split_tokens - 1) / p.split_tokens;  // no empty split
  return p;
}

int64_t WorkspaceFloats(const Plan& p) {
  if (p.splits == 0) return 0;
  return p.slices * p.entries * (p.splits + (p.splits > 1 ? 1 : 0));
}

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kSumThreads)
    GdlaSummaryKernel(GdlaShape shape, int64_t split_tokens, const T* __restrict__ k,
                      const T* __restrict__ v, float* __restrict__ partial) {
  constexpr int kEntriesPerThread = (kMaxD * (kMaxD + 1) + kSumThreads - 1) / kSumThreads;
  __shared__ float fk_s[kSumTile][kMaxD];
  __shared__ float v_s[kSumTile][kMaxD + 1];

  const int dim = static_cast<int>(shape.dim);
  const int cols = dim + 1;
  const int entries = dim * cols;
  const int64_t bh = blockIdx.x;
  const int64_t m_begin = static_cast<int64_t>(blockIdx.y) * split_tokens;
  const int64_t m_end = m_begin + split_tokens < shape.n ? m_begin + split_tokens : shape.n;
  const int64_t slice0 = bh * shape.n;

  float acc[kEntriesPerThread];
#pragma unroll
  for (int t = 0; t < kEntriesPerThread; ++t) acc[t] = 0.f;

  for (int64_t m0 = m_begin; m0 < m_end; m0 += kSumTile) {
    const int64_t left = m_end - m0;
    const int count = left < kSumTile ? static_cast<int>(left) : kSumTile;
    // Tokens past the split stage as zeros (their ones column too): they add nothing.
    for (int idx = threadIdx.x; idx < kSumTile * dim; idx += kSumThreads) {
      const int j = idx / dim, f = idx % dim;
      const bool ok = j < count;
      const int64_t at = (slice0 + m0 + j) * dim + f;
      fk_s[j][f] = ok ? EluFeature(ToFloat(k[at])) : 0.f;
      v_s[j][f] = ok ? ToFloat(v[at]) : 0.f;
    }
    for (int j = threadIdx.x; j < kSumTile; j += kSumThreads) v_s[j][dim] = j < count ? 1.f : 0.f;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kEntriesPerThread; ++t) {
      const int e = threadIdx.x + t * kSumThreads;
      if (e < entries) {
        const int f = e / cols, c = e % cols;
        float a = acc[t];
#pragma unroll 8
        for (int j = 0; j < kSumTile; ++j) a = fmaf(fk_s[j][f], v_s[j][c], a);
        acc[t] = a;
      }
    }
    __syncthreads();
  }
  float* dst = partial + (bh * gridDim.y + blockIdx.y) * entries;
#pragma unroll
  for (int t = 0; t < kEntriesPerThread; ++t) {
    const int e = threadIdx.x + t * kSumThreads;
    if (e < entries) dst[e] = acc[t];
  }
}

__global__ void __launch_bounds__(kReduceThreads)
    GdlaReduceKernel(int64_t entries, int64_t splits, const float* __restrict__ partial,
                     float* __restrict__ summary) {
  const int64_t bh = blockIdx.y;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (e >= entries) return;
  const float* src = partial + bh * splits * entries + e;
  float total = 0.f;
  for (int64_t s = 0; s < splits; ++s) total += src[s * entries];
  summary[bh * entries + e] = total;
}

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kRowThreads)
    GdlaRowsKernel(GdlaShape shape, const T* __restrict__ q, const T* __restrict__ g,
                   const float* __restrict__ lam, const float* __restrict__ norm_weight,
                   const float* __restrict__ summary, T* __restrict__ out) {
  constexpr int kPerLane = (kMaxD + 31) / 32;
  // Dynamic shared memory: the slice's summary (dim x (dim + 1)), then one dim-wide
  // feature row per warp.
  extern __shared__ float smem[];
  const int dim = static_cast<int>(shape.dim), d = dim / 2, cols = dim + 1;
  const int entries = dim * cols;
  float* sum_s = smem;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* feat = smem + entries + warp * dim;

  const int64_t bh = blockIdx.x;
  const int64_t head = bh % shape.heads;
  for (int e = threadIdx.x; e < entries; e += kRowThreads) sum_s[e] = summary[bh * entries + e];
  __syncthreads();

  float lam_r[kPerLane], w_r[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int c = lane + 32 * t;
    lam_r[t] = c < dim ? lam[head * dim + c] : 0.f;
    w_r[t] = c < dim ? (norm_weight != nullptr ? norm_weight[c] : 1.f) : 0.f;
  }
  const float linear_eps = static_cast<float>(kGdlaLinearEps);
  const float eps = static_cast<float>(shape.eps);
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock;
  const int64_t row_end =
      row_begin + kRowsPerBlock < shape.n ? row_begin + kRowsPerBlock : shape.n;
  for (int64_t r = row_begin + warp; r < row_end; r += kRowWarps) {
    const int64_t row = bh * shape.n + r;
    for (int c = lane; c < dim; c += 32) feat[c] = EluFeature(ToFloat(q[row * dim + c]));
    __syncwarp();
    float a1[kPerLane], a2[kPerLane];
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) a1[t] = a2[t] = 0.f;
    float den1 = linear_eps, den2 = linear_eps;
#pragma unroll 4
    for (int i = 0; i < d; ++i) {
      const float f1 = feat[i], f2 = feat[d + i];
      const float* s1 = sum_s + i * cols;
      const float* s2 = sum_s + (d + i) * cols;
      den1 = fmaf(f1, s1[dim], den1);
      den2 = fmaf(f2, s2[dim], den2);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int c = lane + 32 * t;
        if (c < dim) {
          a1[t] = fmaf(f1, s1[c], a1[t]);
          a2[t] = fmaf(f2, s2[c], a2[t]);
        }
      }
    }
    const float w1 = 1.f / den1, w2 = 1.f / den2;
    float y[kPerLane];
    float ss = 0.f;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      y[t] = a1[t] * w1 - lam_r[t] * (a2[t] * w2);  // 0 for channels past dim
      ss = fmaf(y[t], y[t], ss);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float scale = 1.f / sqrtf(ss / static_cast<float>(dim) + eps);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int c = lane + 32 * t;
      if (c >= dim) continue;
      float o = y[t] * scale * w_r[t];
      const float gv = ToFloat(g[row * dim + c]);
      if (shape.gate == GdlaGate::kSigmoid) {
        o *= Sigmoid(gv);
      } else if (shape.gate == GdlaGate::kSilu) {
        o *= gv * Sigmoid(gv);
      }
      Store(out + row * dim + c, o);
    }
    __syncwarp();  // the next row overwrites feat
  }
}

template <typename T, int kMaxD>
cudaError_t LaunchBucket(const GdlaShape& shape, const Plan& plan, cudaStream_t stream,
                         const T* q, const T* k, const T* v, const T* g, const float* lam,
                         const float* norm_weight, T* out, float* workspace) {
  const dim3 sum_grid(static_cast<unsigned>(plan.slices), static_cast<unsigned>(plan.splits));
  GdlaSummaryKernel<T, kMaxD>
      <<<sum_grid, kSumThreads, 0, stream>>>(shape, plan.split_tokens, k, v, workspace);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const float* summary = workspace;
  if (plan.splits > 1) {
    float* total = workspace + plan.slices * plan.splits * plan.entries;
    const dim3 reduce_grid(
        static_cast<unsigned>((plan.entries + kReduceThreads - 1) / kReduceThreads),
        static_cast<unsigned>(plan.slices));
    GdlaReduceKernel<<<reduce_grid, kReduceThreads, 0, stream>>>(plan.entries, plan.splits,
                                                                 workspace, total);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    summary = total;
  }
  const size_t smem = sizeof(float) * (plan.entries + kRowWarps * shape.dim);
  auto* rows_kernel = &GdlaRowsKernel<T, kMaxD>;
  if (smem > 48 * 1024) {
    err = cudaFuncSetAttribute(rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const int64_t row_tiles = (shape.n + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 rows_grid(static_cast<unsigned>(plan.slices), static_cast<unsigned>(row_tiles));
  rows_kernel<<<rows_grid, kRowThreads, smem, stream>>>(shape, q, g, lam, norm_weight, summary,
                                                         out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchTyped(const GdlaShape& shape, const Plan& plan, const void* q, const void* k,
                        const void* v, const void* g, const float* lam,
                        const float* norm_weight, void* out, float* workspace,
                        cudaStream_t stream) {
  auto args = [&](auto bucket) {
    constexpr int kD = decltype(bucket)::value;
    return LaunchBucket<T, kD>(shape, plan, stream, static_cast<const T*>(q),
                               static_cast<const T*>(k), static_cast<const T*>(v),
                               static_cast<const T*>(g), lam, norm_weight, static_cast<T*>(out),
                               workspace);
  };
  if (shape.dim <= 16) return args(std::integral_constant<int, 16>{});
  if (shape.dim <= 32) return args(std::integral_constant<int, 32>{});
  if (shape.dim <= 64) return args(std::integral_constant<int, 64>{});
  return args(std::integral_constant<int, 128>{});
}

}  // namespace

int64_t GdlaCudaWorkspaceFloats(const GdlaShape& shape) {
  return WorkspaceFloats(MakePlan(shape));
}

int LaunchGdlaForward(const GdlaShape& shape, GdlaDType dtype, const void* q, const void* k,
                      const void* v, const void* g, const float* lam, const float* norm_weight,
                      void* out, float* workspace, void* stream) {
  if (shape.dim < 2 || shape.dim % 2 != 0 || shape.dim > kGdlaCudaMaxHeadDim || shape.n < 0 ||
      shape.batch < 0 || shape.heads < 0) {
    return cudaErrorInvalidValue;
  }
  const int gate = static_cast<int>(shape.gate);
  if (gate < 0 || gate > 2) return cudaErrorInvalidValue;
  const Plan plan = MakePlan(shape);
  if (plan.splits == 0) return cudaSuccess;  // no token or no head slice
  const int64_t row_tiles = (shape.n + kRowsPerBlock - 1) / kRowsPerBlock;
  if (row_tiles > 65535 || plan.splits > 65535 || plan.slices > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case GdlaDType::kFloat32:
      return LaunchTyped<float>(shape, plan, q, k, v, g, lam, norm_weight, out, workspace, s);
    case GdlaDType::kFloat16:
      return LaunchTyped<__half>(shape, plan, q, k, v, g, lam, norm_weight, out, workspace, s);
  }
  return cudaErrorInvalidValue;
}

const char* GdlaCudaErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace gatescope::ops
