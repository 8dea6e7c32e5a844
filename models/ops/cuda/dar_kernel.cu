// Flash-style CUDA kernel of the fused DAR attention forward. Needs only the CUDA runtime.
//
// Launch: grid (batch * heads, ceil(nq / kThreads)), kThreads threads per block; one thread
// owns one query row and keeps its online-softmax (max, sum) pair, its dv-wide accumulator
// and its two row_stats counters in registers. The block walks the keys in tiles of
// kKeyTile staged in shared memory (fp32, with each key's inverse norm and visibility), so
// the cosine, the resonance and the logit of a pair exist only transiently; no N x N map
// exists at any point. Head dims are zero-padded to a compile-time bucket (16/32/64/128).
// Under the causal mask a block stops at the last key its highest row can see.
// Static shared memory per block: 4 * kKeyTile * (2 * bucket + kThreads + 1) + kKeyTile
// bytes, i.e. 20,560 bytes for the 128 bucket.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "gatescope/ops/dar_cuda_kernel.h"

namespace gatescope::ops {
namespace {

constexpr int kThreads = 64;
constexpr int kKeyTile = 16;
// Threads cooperating on one staged key's squared norm (a shuffle group inside a warp).
constexpr int kNormLanes = kThreads / kKeyTile;
static_assert(kNormLanes * kKeyTile == kThreads && kNormLanes <= 32 &&
                  (kNormLanes & (kNormLanes - 1)) == 0,
              "each staged key needs a power-of-two group of lanes in one warp");

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ void Store(float* p, float x) { *p = x; }
__device__ __forceinline__ void Store(__half* p, float x) { *p = __float2half(x); }

// Same clamp as the CPU kernel's sigmoid so saturated pairs agree exactly.
__device__ __forceinline__ float Sigmoid(float x) {
  x = fminf(fmaxf(x, -80.f), 80.f);
  return 1.f / (1.f + expf(-x));
}

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    DarForwardKernel(DarShape shape, const T* __restrict__ q, const T* __restrict__ k,
                     const T* __restrict__ v, const uint8_t* __restrict__ key_mask,
                     T* __restrict__ out, float* __restrict__ row_stats) {
  __shared__ float k_s[kKeyTile][kMaxD];
  __shared__ float v_s[kKeyTile][kMaxD];
  __shared__ float inv_k_s[kKeyTile];
  __shared__ uint8_t ok_s[kKeyTile];
  // Per-thread score column (stride kThreads): keeps the key loop un-unrolled without a
  // per-thread score array in local memory.
  __shared__ float scores_s[kKeyTile * kThreads];

  const int64_t bh = blockIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kThreads;
  const int64_t row = row0 + threadIdx.x;
  const bool active = row < shape.nq;
  const int d = static_cast<int>(shape.d);
  const int dv = static_cast<int>(shape.dv);
  const float scale = static_cast<float>(shape.scale);
  const float lam = shape.lam, rho = shape.rho, alpha = shape.alpha, beta = shape.beta;
  const float eps = static_cast<float>(kDarNormEps);
  const uint8_t* mask = key_mask ? key_mask + (bh / shape.heads) * shape.nk : nullptr;

  // Scaled query; cos_factor turns a scaled score into the cosine (as in the CPU kernel).
  float qs[kMaxD], acc[kMaxD];
  float ss = 0.f;
  const int64_t q_off = (bh * shape.nq + row) * shape.d;
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) {
    qs[c] = (active && c < d) ? ToFloat(q[q_off + c]) : 0.f;
    ss = fmaf(qs[c], qs[c], ss);
    qs[c] *= scale;
    acc[c] = 0.f;
  }
  const float cos_factor = 1.f / (sqrtf(ss) + eps) / scale;
  float run_max = -INFINITY, sum = 0.f;
  int crossings = 0, visible = 0;

  int64_t key_end = shape.nk;
  if (shape.causal && row0 + kThreads < key_end) key_end = row0 + kThreads;
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
    const int64_t left = key_end - j0;
    const int n = left < kKeyTile ? static_cast<int>(left) : kKeyTile;
    const int64_t key0 = bh * shape.nk + j0;
    for (int idx = threadIdx.x; idx < kKeyTile * kMaxD; idx += kThreads) {
      const int j = idx / kMaxD, c = idx % kMaxD;
      k_s[j][c] = (j < n && c < d) ? ToFloat(k[(key0 + j) * d + c]) : 0.f;
      v_s[j][c] = (j < n && c < dv) ? ToFloat(v[(key0 + j) * dv + c]) : 0.f;
    }
    __syncthreads();
    {
      // kNormLanes adjacent lanes share one key's squared norm.
      const int j = threadIdx.x / kNormLanes, part = threadIdx.x % kNormLanes;
      float partial = 0.f;
#pragma unroll
      for (int c = part; c < kMaxD; c += kNormLanes) partial = fmaf(k_s[j][c], k_s[j][c], partial);
#pragma unroll
      for (int off = kNormLanes / 2; off > 0; off /= 2) {
        partial += __shfl_xor_sync(0xffffffffu, partial, off);
      }
      if (part == 0) {
        inv_k_s[j] = 1.f / (sqrtf(partial) + eps);
        ok_s[j] = j < n && (mask == nullptr || mask[j0 + j] != 0);
      }
    }
    __syncthreads();
    if (active) {
      float* scores = scores_s + threadIdx.x;
      // Keys past the row are invisible under the causal mask.
      int limit = n;
      if (shape.causal && row - j0 + 1 < limit) limit = static_cast<int>(row - j0 + 1);
      float tile_max = -INFINITY;
      int seen = 0;
#pragma unroll 1
      for (int j = 0; j < n; ++j) {
        float s = -INFINITY;
        if (j < limit && ok_s[j]) {
          float dot = 0.f;
#pragma unroll
          for (int c = 0; c < kMaxD; ++c) dot = fmaf(qs[c], k_s[j][c], dot);
          ++seen;
          const float cosine = dot * cos_factor * inv_k_s[j];
          crossings += cosine > rho ? 1 : 0;
          if (lam != 0.f) {
            float res = 0.f;
#pragma unroll 1
            for (int t = 0; t < shape.steps; ++t) {
              res = Sigmoid(alpha * (cosine + beta * res - rho));
            }
            dot += lam * res;
          }
          s = dot;
          tile_max = fmaxf(tile_max, s);
        }
        scores[j * kThreads] = s;
      }
      visible += seen;
      // A tile without visible keys is not folded, so a fully masked row keeps sum = 0.
      if (seen > 0) {
        const float new_max = fmaxf(run_max, tile_max);
        const float correction = expf(run_max - new_max);  // 0 on the first folded tile
        sum *= correction;
#pragma unroll
        for (int c = 0; c < kMaxD; ++c) acc[c] *= correction;
#pragma unroll 1
        for (int j = 0; j < n; ++j) {
          const float s = scores[j * kThreads];
          if (s == -INFINITY) continue;  // masked: its value row never enters the result
          const float p = expf(s - new_max);
          sum += p;
#pragma unroll
          for (int c = 0; c < kMaxD; ++c) acc[c] = fmaf(p, v_s[j][c], acc[c]);
        }
        run_max = new_max;
      }
    }
    __syncthreads();
  }
  if (!active) return;
  const int64_t out_row = bh * shape.nq + row;
  const float w = sum > 0.f ? 1.f / sum : 0.f;
  T* o = out + out_row * dv;
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) {
    if (c < dv) Store(o + c, w * acc[c]);
  }
  row_stats[2 * out_row] = static_cast<float>(crossings);
  row_stats[2 * out_row + 1] = static_cast<float>(visible);
}

template <typename T, int kMaxD>
cudaError_t LaunchBucket(const DarShape& shape, dim3 grid, cudaStream_t stream, const T* q,
                         const T* k, const T* v, const uint8_t* mask, T* out, float* stats) {
  DarForwardKernel<T, kMaxD><<<grid, kThreads, 0, stream>>>(shape, q, k, v, mask, out, stats);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchTyped(const DarShape& shape, const void* q, const void* k, const void* v,
                        const uint8_t* mask, void* out, float* stats, cudaStream_t stream) {
  const int64_t batch_heads = shape.batch * shape.heads;
  const int64_t row_tiles = (shape.nq + kThreads - 1) / kThreads;
  if (row_tiles > 65535 || batch_heads > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(batch_heads), static_cast<unsigned>(row_tiles));
  const int64_t widest = shape.d > shape.dv ? shape.d : shape.dv;
  auto args = [&](auto bucket) {
    constexpr int kD = decltype(bucket)::value;
    return LaunchBucket<T, kD>(shape, grid, stream, static_cast<const T*>(q),
                               static_cast<const T*>(k), static_cast<const T*>(v), mask,
                               static_cast<T*>(out), stats);
  };
  if (widest <= 16) return args(std::integral_constant<int, 16>{});
  if (widest <= 32) return args(std::integral_constant<int, 32>{});
  if (widest <= 64) return args(std::integral_constant<int, 64>{});
  return args(std::integral_constant<int, 128>{});
}

}  // namespace

int LaunchDarForward(const DarShape& shape, DarDType dtype, const void* q, const void* k,
                     const void* v, const uint8_t* key_mask, void* out, float* row_stats,
                     void* stream) {
  if (shape.d <= 0 || shape.dv <= 0 || shape.d > kDarCudaMaxHeadDim ||
      shape.dv > kDarCudaMaxHeadDim || shape.nk < 0 || shape.steps < 1) {
    return cudaErrorInvalidValue;
  }
  if (shape.nq <= 0 || shape.batch <= 0 || shape.heads <= 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DarDType::kFloat32:
      return LaunchTyped<float>(shape, q, k, v, key_mask, out, row_stats, s);
    case DarDType::kFloat16:
      return LaunchTyped<__half>(shape, q, k, v, key_mask, out, row_stats, s);
  }
  return cudaErrorInvalidValue;
}

const char* DarCudaErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace gatescope::ops
