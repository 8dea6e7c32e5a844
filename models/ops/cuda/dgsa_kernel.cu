// Flash-style CUDA kernel of the fused M-DGSA forward. Needs only the CUDA runtime.
//
// One thread owns one query row; a block of kThreads rows walks the keys in tiles of
// kKeyTile staged in shared memory, keeping for each branch an online-softmax (max, sum)
// pair and a dv-wide accumulator in registers. No N x N map exists at any point.
// Head dims are zero-padded to a compile-time bucket (16/32/64/128).
//
// With a key mask (a separate instantiation, so the unmasked kernel is unchanged) warp 0
// lists each tile's visible keys with a ballot and only those are staged (gathered to the
// front of the tile): hidden keys cost no arithmetic, a tile without visible keys is not
// folded, and a sequence padded at the end gives the same tiles as the unpadded one. A row
// that sees no key keeps sum = 0 and is written as 0.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "gatescope/ops/dgsa_cuda_kernel.h"

namespace gatescope::ops {
namespace {

constexpr int kThreads = 64;
constexpr int kKeyTile = 16;
static_assert(kKeyTile <= 32 && kThreads >= 32,
              "warp 0 lists a tile's visible keys with one ballot");

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ void Store(float* p, float x) { *p = x; }
__device__ __forceinline__ void Store(__half* p, float x) { *p = __float2half(x); }

// Folds one staged key tile (n valid keys) into a branch's running state. `scores` is this
// thread's column of a shared [kKeyTile][kThreads] scratch (stride kThreads), which keeps
// the key loop un-unrolled without spilling a per-thread score array.
template <int kMaxD>
__device__ __forceinline__ void FoldTile(const float (&q)[kMaxD], const float (*keys)[kMaxD],
                                         const float (*values)[kMaxD], int n, float* scores,
                                         float& max, float& sum, float (&acc)[kMaxD]) {
  float tile_max = -INFINITY;
#pragma unroll 1
  for (int j = 0; j < n; ++j) {
    float dot = 0.f;
#pragma unroll
    for (int c = 0; c < kMaxD; ++c) dot = fmaf(q[c], keys[j][c], dot);
    scores[j * kThreads] = dot;
    tile_max = fmaxf(tile_max, dot);
  }
  const float new_max = fmaxf(max, tile_max);
  const float correction = expf(max - new_max);
  sum *= correction;
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) acc[c] *= correction;
#pragma unroll 1
  for (int j = 0; j < n; ++j) {
    const float p = expf(scores[j * kThreads] - new_max);
    sum += p;
#pragma unroll
    for (int c = 0; c < kMaxD; ++c) acc[c] = fmaf(p, values[j][c], acc[c]);
  }
  max = new_max;
}

// kMasked: key_mask is non-null ([batch, nk], row bh / shape.heads); otherwise unread.
template <typename T, int kMaxD, bool kMasked>
__global__ void __launch_bounds__(kThreads)
    DgsaForwardKernel(DgsaShape shape, const T* __restrict__ q_pos, const T* __restrict__ k_pos,
                      const T* __restrict__ q_neg, const T* __restrict__ k_neg,
                      const T* __restrict__ v, const T* __restrict__ gate,
                      const uint8_t* __restrict__ key_mask, T* __restrict__ out) {
  __shared__ float kp_s[kKeyTile][kMaxD];
  __shared__ float kn_s[kKeyTile][kMaxD];
  __shared__ float v_s[kKeyTile][kMaxD];
  __shared__ float scores_s[kKeyTile * kThreads];
  // Masked only: offsets (within the tile) of its visible keys, and how many there are.
  __shared__ int visible_s[kMasked ? kKeyTile : 1];
  __shared__ int visible_count_s;

  const int64_t bh = blockIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  const bool active = row < shape.nq;
  const int d = static_cast<int>(shape.d);
  const int dv = static_cast<int>(shape.dv);
  const int64_t q_off = (bh * shape.nq + row) * shape.d;
  const float scale = static_cast<float>(shape.scale);

  float qp[kMaxD], qn[kMaxD], acc_p[kMaxD], acc_n[kMaxD];
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) {
    const bool in = active && c < d;
    qp[c] = in ? ToFloat(q_pos[q_off + c]) * scale : 0.f;
    qn[c] = in ? ToFloat(q_neg[q_off + c]) * scale : 0.f;
    acc_p[c] = 0.f;
    acc_n[c] = 0.f;
  }
  float max_p = -INFINITY, sum_p = 0.f, max_n = -INFINITY, sum_n = 0.f;

  const uint8_t* mask = kMasked ? key_mask + (bh / shape.heads) * shape.nk : nullptr;

  for (int64_t j0 = 0; j0 < shape.nk; j0 += kKeyTile) {
    const int64_t left = shape.nk - j0;
    int n = left < kKeyTile ? static_cast<int>(left) : kKeyTile;
    if constexpr (kMasked) {
      if (threadIdx.x < 32) {
        const int lane = static_cast<int>(threadIdx.x);
        const bool visible = lane < n && mask[j0 + lane] != 0;
        const unsigned ballot = __ballot_sync(0xffffffffu, visible);
        if (visible) visible_s[__popc(ballot & ((1u << lane) - 1u))] = lane;
        if (lane == 0) visible_count_s = __popc(ballot);
      }
      __syncthreads();
      n = visible_count_s;  // the same for the whole block
    }
    for (int idx = threadIdx.x; idx < kKeyTile * kMaxD; idx += kThreads) {
      const int j = idx / kMaxD, c = idx % kMaxD;
      int offset = j;
      if constexpr (kMasked) offset = j < n ? visible_s[j] : 0;
      const int64_t key = bh * shape.nk + j0 + offset;
      const bool kin = j < n && c < d;
      kp_s[j][c] = kin ? ToFloat(k_pos[key * d + c]) : 0.f;
      kn_s[j][c] = kin ? ToFloat(k_neg[key * d + c]) : 0.f;
      v_s[j][c] = (j < n && c < dv) ? ToFloat(v[key * dv + c]) : 0.f;
    }
    __syncthreads();
    // n == 0 (masked tile without visible keys) must not be folded: exp(-inf - -inf).
    if (active && (!kMasked || n > 0)) {
      FoldTile<kMaxD>(qp, kp_s, v_s, n, scores_s + threadIdx.x, max_p, sum_p, acc_p);
      FoldTile<kMaxD>(qn, kn_s, v_s, n, scores_s + threadIdx.x, max_n, sum_n, acc_n);
    }
    __syncthreads();
  }
  if (!active) return;
  const float g = ToFloat(gate[bh * shape.nq + row]);
  // sum = 0 only for a row without visible keys (its accumulators are 0 too).
  const float wp = sum_p > 0.f ? g / sum_p : 0.f;
  const float wn = sum_n > 0.f ? (1.f - g) / sum_n : 0.f;
  T* o = out + (bh * shape.nq + row) * dv;
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) {
    if (c < dv) Store(o + c, wp * acc_p[c] - wn * acc_n[c]);
  }
}

template <typename T, int kMaxD>
cudaError_t LaunchBucket(const DgsaShape& shape, dim3 grid, cudaStream_t stream, const T* qp,
                         const T* kp, const T* qn, const T* kn, const T* v, const T* g,
                         const uint8_t* mask, T* o) {
  if (mask != nullptr) {
    DgsaForwardKernel<T, kMaxD, true>
        <<<grid, kThreads, 0, stream>>>(shape, qp, kp, qn, kn, v, g, mask, o);
  } else {
    DgsaForwardKernel<T, kMaxD, false>
        <<<grid, kThreads, 0, stream>>>(shape, qp, kp, qn, kn, v, g, nullptr, o);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchTyped(const DgsaShape& shape, const void* qp, const void* kp, const void* qn,
                        const void* kn, const void* v, const void* g, const uint8_t* mask,
                        void* o, cudaStream_t stream) {
  const int64_t row_tiles = (shape.nq + kThreads - 1) / kThreads;
  if (row_tiles > 65535 || shape.batch_heads > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(shape.batch_heads), static_cast<unsigned>(row_tiles));
  const int64_t widest = shape.d > shape.dv ? shape.d : shape.dv;
  auto args = [&](auto bucket) {
    constexpr int kD = decltype(bucket)::value;
    return LaunchBucket<T, kD>(shape, grid, stream, static_cast<const T*>(qp),
                               static_cast<const T*>(kp), static_cast<const T*>(qn),
                               static_cast<const T*>(kn), static_cast<const T*>(v),
                               static_cast<const T*>(g), mask, static_cast<T*>(o));
  };
  if (widest <= 16) return args(std::integral_constant<int, 16>{});
  if (widest <= 32) return args(std::integral_constant<int, 32>{});
  if (widest <= 64) return args(std::integral_constant<int, 64>{});
  return args(std::integral_constant<int, 128>{});
}

}  // namespace

int LaunchDgsaForward(const DgsaShape& shape, DgsaDType dtype, const void* q_pos,
                      const void* k_pos, const void* q_neg, const void* k_neg, const void* v,
                      const void* gate, const uint8_t* key_mask, void* out, void* stream) {
  if (shape.d <= 0 || shape.dv <= 0 || shape.nk <= 0 || shape.d > kDgsaCudaMaxHeadDim ||
      shape.dv > kDgsaCudaMaxHeadDim || (key_mask != nullptr && shape.heads < 1)) {
    return cudaErrorInvalidValue;
  }
  if (shape.nq == 0 || shape.batch_heads == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DgsaDType::kFloat32:
      return LaunchTyped<float>(shape, q_pos, k_pos, q_neg, k_neg, v, gate, key_mask, out, s);
    case DgsaDType::kFloat16:
      return LaunchTyped<__half>(shape, q_pos, k_pos, q_neg, k_neg, v, gate, key_mask, out,
                                 s);
  }
  return cudaErrorInvalidValue;
}

const char* DgsaCudaErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace gatescope::ops
