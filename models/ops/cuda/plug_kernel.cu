// Flash-style CUDA kernel of the fused PLuG attention forward. Needs only the CUDA runtime.
//
// Launch: grid (batch * ceil(heads / kHeadSlots), ceil(nq / kRows)), kThreads = kRows *
// kHeadSlots threads per block. Thread (slot, row) owns query row `row` of head
// head0 + slot and keeps its online-softmax (max, sum) pair and its dv-wide accumulator in
// registers. The block walks the keys in tiles of kKeyTile staged in shared memory (fp32):
// both heads' keys and values and the tile's gate keys. The head-shared gate factor 1 + G
// of the block's (row, key) pairs is computed once per tile, split over both head slots,
// and kept in shared memory for that tile only, so R and G are never held beyond
// kRows x kKeyTile values and no N x N map exists. Head dims are zero-padded to a
// compile-time bucket (16/32/64/128) covering d, dv and dg.
// The gml weights come from a device float[4] that every thread reads once (no host copy).
// Static shared memory per block: 4 * kKeyTile * ((2 * kHeadSlots + 1) * bucket + kRows)
// bytes, i.e. 45,056 bytes for the 128 bucket. The 128 bucket needs more than 255
// registers per thread for the query and accumulator and spills (as the DAR kernel does).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "gatescope/ops/plug_cuda_kernel.h"

namespace gatescope::ops {
namespace {

constexpr int kRows = 64;                        // query rows per block
constexpr int kHeadSlots = 2;                    // heads sharing one gate tile
constexpr int kThreads = kRows * kHeadSlots;
constexpr int kKeyTile = 16;
constexpr int kGateKeys = kKeyTile / kHeadSlots;  // gate pairs per thread per tile
static_assert(kGateKeys * kHeadSlots == kKeyTile, "each slot computes whole key columns");
static_assert(kRows % 32 == 0, "a warp must lie inside one head slot");

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ void Store(float* p, float x) { *p = x; }
__device__ __forceinline__ void Store(__half* p, float x) { *p = __float2half(x); }

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    PlugForwardKernel(PlugShape shape, const T* __restrict__ q, const T* __restrict__ k,
                      const T* __restrict__ v, const T* __restrict__ q_gate,
                      const T* __restrict__ k_gate, const float* __restrict__ gml,
                      T* __restrict__ out) {
  __shared__ float k_s[kHeadSlots][kKeyTile][kMaxD];
  __shared__ float v_s[kHeadSlots][kKeyTile][kMaxD];
  __shared__ float kg_s[kKeyTile][kMaxD];
  __shared__ float factor_s[kKeyTile][kRows];  // 1 + G of (key, row) in this tile

  const int slot = threadIdx.x / kRows, lane_row = threadIdx.x % kRows;
  const int64_t heads = shape.heads, nq = shape.nq, nk = shape.nk;
  const int64_t groups = (heads + kHeadSlots - 1) / kHeadSlots;
  const int64_t b = blockIdx.x / groups;
  const int64_t head0 = (blockIdx.x % groups) * kHeadSlots;
  const int64_t head = head0 + slot;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kRows + lane_row;
  const bool row_ok = row < nq;
  const bool active = row_ok && head < heads;
  const int d = static_cast<int>(shape.d);
  const int dv = static_cast<int>(shape.dv);
  const int dg = static_cast<int>(shape.dg);
  const float scale = static_cast<float>(shape.scale);
  const float gate_scale = static_cast<float>(shape.gate_scale);
  const bool tanh_gate = shape.tanh_gate;
  const float wa = __ldg(gml), wb = __ldg(gml + 1), ba = __ldg(gml + 2), bb = __ldg(gml + 3);

  float qs[kMaxD], acc[kMaxD];
  const int64_t q_off = ((b * heads + head) * nq + row) * d;
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) {
    qs[c] = (active && c < d) ? ToFloat(q[q_off + c]) * scale : 0.f;
    acc[c] = 0.f;
  }
  // Rows past nq skip the gate tile; their column of factor_s is never read.
  const T* qg_row = q_gate + (b * nq + (row_ok ? row : 0)) * dg;
  float run_max = -INFINITY, sum = 0.f;

  for (int64_t j0 = 0; j0 < nk; j0 += kKeyTile) {
    const int64_t left = nk - j0;
    const int n = left < kKeyTile ? static_cast<int>(left) : kKeyTile;
    for (int idx = threadIdx.x; idx < kHeadSlots * kKeyTile * kMaxD; idx += kThreads) {
      const int s = idx / (kKeyTile * kMaxD), j = (idx / kMaxD) % kKeyTile, c = idx % kMaxD;
      const bool ok = head0 + s < heads && j < n;
      const int64_t key = ((b * heads + head0 + s) * nk + j0 + j);
      k_s[s][j][c] = (ok && c < d) ? ToFloat(k[key * d + c]) : 0.f;
      v_s[s][j][c] = (ok && c < dv) ? ToFloat(v[key * dv + c]) : 0.f;
    }
    for (int idx = threadIdx.x; idx < kKeyTile * kMaxD; idx += kThreads) {
      const int j = idx / kMaxD, c = idx % kMaxD;
      kg_s[j][c] = (j < n && c < dg) ? ToFloat(k_gate[(b * nk + j0 + j) * dg + c]) : 0.f;
    }
    __syncthreads();
    if (row_ok) {
      // This thread's share of the gate tile: its row against keys slot, slot + kHeadSlots,
      // ... (the query gate row is re-read from global memory; it stays in L1).
      float r[kGateKeys];
#pragma unroll
      for (int t = 0; t < kGateKeys; ++t) r[t] = 0.f;
#pragma unroll 4
      for (int c = 0; c < dg; ++c) {
        const float x = ToFloat(qg_row[c]);
#pragma unroll
        for (int t = 0; t < kGateKeys; ++t) r[t] = fmaf(x, kg_s[slot + t * kHeadSlots][c], r[t]);
      }
#pragma unroll
      for (int t = 0; t < kGateKeys; ++t) {
        const float rr = r[t] * gate_scale;
        float g = fmaf(wa, rr, ba) * fmaf(wb, rr, bb);
        if (tanh_gate) g = tanhf(g);
        factor_s[slot + t * kHeadSlots][lane_row] = 1.f + g;
      }
    }
    __syncthreads();
    if (active) {
      float sc[kKeyTile];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeyTile; ++j) {
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < kMaxD; ++c) dot = fmaf(qs[c], k_s[slot][j][c], dot);
        sc[j] = j < n ? dot * factor_s[j][lane_row] : -INFINITY;
        tile_max = fmaxf(tile_max, sc[j]);
      }
      // n >= 1, so tile_max is a real score.
      const float new_max = fmaxf(run_max, tile_max);
      const float correction = expf(run_max - new_max);  // 0 on the first tile
      sum *= correction;
#pragma unroll
      for (int c = 0; c < kMaxD; ++c) acc[c] *= correction;
#pragma unroll
      for (int j = 0; j < kKeyTile; ++j) {
        const float p = j < n ? expf(sc[j] - new_max) : 0.f;
        sum += p;
#pragma unroll
        for (int c = 0; c < kMaxD; ++c) acc[c] = fmaf(p, v_s[slot][j][c], acc[c]);
      }
      run_max = new_max;
    }
    __syncthreads();
  }
  if (!active) return;
  const float w = sum > 0.f ? 1.f / sum : 0.f;  // sum == 0 only when nk == 0
  T* o = out + ((b * heads + head) * nq + row) * dv;
#pragma unroll
  for (int c = 0; c < kMaxD; ++c) {
    if (c < dv) Store(o + c, w * acc[c]);
  }
}

template <typename T>
cudaError_t LaunchTyped(const PlugShape& shape, const void* q, const void* k, const void* v,
                        const void* q_gate, const void* k_gate, const float* gml, void* out,
                        cudaStream_t stream) {
  const int64_t groups = shape.batch * ((shape.heads + kHeadSlots - 1) / kHeadSlots);
  const int64_t row_tiles = (shape.nq + kRows - 1) / kRows;
  if (row_tiles > 65535 || groups > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(row_tiles));
  int64_t widest = shape.d > shape.dv ? shape.d : shape.dv;
  widest = widest > shape.dg ? widest : shape.dg;
  auto launch = [&](auto bucket) {
    constexpr int kD = decltype(bucket)::value;
    PlugForwardKernel<T, kD><<<grid, kThreads, 0, stream>>>(
        shape, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<const T*>(q_gate), static_cast<const T*>(k_gate), gml, static_cast<T*>(out));
    return cudaGetLastError();
  };
  if (widest <= 16) return launch(std::integral_constant<int, 16>{});
  if (widest <= 32) return launch(std::integral_constant<int, 32>{});
  if (widest <= 64) return launch(std::integral_constant<int, 64>{});
  return launch(std::integral_constant<int, 128>{});
}

}  // namespace

int LaunchPlugForward(const PlugShape& shape, PlugDType dtype, const void* q, const void* k,
                      const void* v, const void* q_gate, const void* k_gate, const float* gml,
                      void* out, void* stream) {
  if (shape.d <= 0 || shape.dv <= 0 || shape.dg <= 0 || shape.d > kPlugCudaMaxHeadDim ||
      shape.dv > kPlugCudaMaxHeadDim || shape.dg > kPlugCudaMaxHeadDim || shape.nk < 0) {
    return cudaErrorInvalidValue;
  }
  if (shape.nq <= 0 || shape.batch <= 0 || shape.heads <= 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case PlugDType::kFloat32:
      return LaunchTyped<float>(shape, q, k, v, q_gate, k_gate, gml, out, s);
    case PlugDType::kFloat16:
      return LaunchTyped<__half>(shape, q, k, v, q_gate, k_gate, gml, out, s);
  }
  return cudaErrorInvalidValue;
}

const char* PlugCudaErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace gatescope::ops
