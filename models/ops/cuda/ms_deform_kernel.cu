// CUDA kernel of the multi-scale deformable attention forward. Needs only the CUDA runtime.
//
// One thread per (batch item, query, head, channel group): a group is kVec consecutive
// channels (chosen per launch: 16-byte loads when the channel count and the pointers allow,
// narrower otherwise), so the threads of one (query, head) read each neighbour pixel's
// channel row in one coalesced segment, and consecutive heads follow. Each thread walks the
// levels and points itself, computes the bilinear corners with the same rule as the CPU
// kernel (MsDeformBilinear) and keeps kVec accumulators in registers: fp32 for fp32 and
// fp16 data, fp64 for fp64. No shared memory, no intermediate tensor. Grid-stride loop over
// all groups.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gatescope/ops/ms_deform_cuda_kernel.h"

namespace gatescope::ops {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

template <typename T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};

__device__ __forceinline__ float ToAcc(float x) { return x; }
__device__ __forceinline__ double ToAcc(double x) { return x; }
__device__ __forceinline__ float ToAcc(__half x) { return __half2float(x); }
__device__ __forceinline__ void FromAcc(float x, float* y) { *y = x; }
__device__ __forceinline__ void FromAcc(double x, double* y) { *y = x; }
__device__ __forceinline__ void FromAcc(float x, __half* y) { *y = __float2half_rn(x); }

// kVec values loaded or stored as one aligned access.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    MsDeformForwardKernel(MsDeformShape s, MsDeformPointers<T> p, int64_t total) {
  using Acc = typename AccOf<T>::type;
  using P = Pack<T, kVec>;
  const int64_t groups = s.channels / kVec;
  const int64_t pixel_stride = s.heads * s.channels;
  const int64_t lp_count = s.levels * s.points;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t group = i % groups;
    const int64_t nqm = i / groups;  // (n * queries + q) * heads + m
    const int64_t m = nqm % s.heads;
    const int64_t n = nqm / (s.heads * s.queries);
    const T* base = p.value + n * s.spatial * pixel_stride + m * s.channels + group * kVec;
    const T* loc = p.sampling_locations + nqm * lp_count * 2;
    const T* attn = p.attention_weights + nqm * lp_count;
    Acc acc[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[j] = Acc(0);
    for (int64_t l = 0; l < s.levels; ++l) {
      const int64_t h = __ldg(p.spatial_shapes + 2 * l), w = __ldg(p.spatial_shapes + 2 * l + 1);
      const T* level = base + __ldg(p.level_start + l) * pixel_stride;
      for (int64_t pt = 0; pt < s.points; ++pt) {
        const int64_t lp = l * s.points + pt;
        const Acc x = ToAcc(loc[2 * lp]), y = ToAcc(loc[2 * lp + 1]), a = ToAcc(attn[lp]);
        MsDeformCorners<Acc> c;
        if (!MsDeformBilinear(x, y, h, w, c)) {
          // 0, or NaN for a non-finite location or weight (as in the reference).
          const Acc term = MsDeformRejectedTerm(x, y, a);
          if (term != Acc(0)) {
#pragma unroll
            for (int j = 0; j < kVec; ++j) acc[j] += term;
          }
          continue;
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          if (c.pixel[k] < 0) continue;
          const Acc wk = a * c.weight[k];
          const P v = *reinterpret_cast<const P*>(level + c.pixel[k] * pixel_stride);
#pragma unroll
          for (int j = 0; j < kVec; ++j) acc[j] += wk * ToAcc(v.v[j]);
        }
      }
    }
    P o;
#pragma unroll
    for (int j = 0; j < kVec; ++j) FromAcc(acc[j], &o.v[j]);
    *reinterpret_cast<P*>(p.out + nqm * s.channels + group * kVec) = o;
  }
}

template <typename T, int kVec>
cudaError_t LaunchVec(const MsDeformShape& s, const MsDeformPointers<T>& p,
                      cudaStream_t stream) {
  const int64_t total = s.batch * s.queries * s.heads * (s.channels / kVec);
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  MsDeformForwardKernel<T, kVec>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(s, p, total);
  return cudaGetLastError();
}

// The widest group (at most 16 bytes) that divides the channel count and keeps every
// value and output access aligned.
template <typename T>
cudaError_t LaunchTyped(const MsDeformShape& s, const void* value, const int64_t* shapes,
                        const int64_t* starts, const void* locations, const void* weights,
                        void* out, cudaStream_t stream) {
  MsDeformPointers<T> p;
  p.value = static_cast<const T*>(value);
  p.spatial_shapes = shapes;
  p.level_start = starts;
  p.sampling_locations = static_cast<const T*>(locations);
  p.attention_weights = static_cast<const T*>(weights);
  p.out = static_cast<T*>(out);
  auto fits = [&](int vec) {
    const auto bytes = static_cast<uintptr_t>(vec) * sizeof(T);
    return s.channels % vec == 0 && reinterpret_cast<uintptr_t>(value) % bytes == 0 &&
           reinterpret_cast<uintptr_t>(out) % bytes == 0;
  };
  constexpr int kWidest = static_cast<int>(16 / sizeof(T));
  if constexpr (kWidest >= 8) {
    if (fits(8)) return LaunchVec<T, 8>(s, p, stream);
  }
  if constexpr (kWidest >= 4) {
    if (fits(4)) return LaunchVec<T, 4>(s, p, stream);
  }
  if (fits(2)) return LaunchVec<T, 2>(s, p, stream);
  return LaunchVec<T, 1>(s, p, stream);
}

}  // namespace

int LaunchMsDeformForward(const MsDeformShape& shape, MsDeformDType dtype, const void* value,
                          const int64_t* spatial_shapes, const int64_t* level_start,
                          const void* sampling_locations, const void* attention_weights,
                          void* out, void* stream) {
  if (shape.batch < 0 || shape.spatial < 0 || shape.heads < 0 || shape.channels < 0 ||
      shape.queries < 0 || shape.levels < 0 || shape.points < 0) {
    return cudaErrorInvalidValue;
  }
  if (shape.batch * shape.queries * shape.heads * shape.channels == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case MsDeformDType::kFloat32:
      return LaunchTyped<float>(shape, value, spatial_shapes, level_start, sampling_locations,
                                attention_weights, out, s);
    case MsDeformDType::kFloat16:
      return LaunchTyped<__half>(shape, value, spatial_shapes, level_start, sampling_locations,
                                 attention_weights, out, s);
    case MsDeformDType::kFloat64:
      return LaunchTyped<double>(shape, value, spatial_shapes, level_start, sampling_locations,
                                 attention_weights, out, s);
  }
  return cudaErrorInvalidValue;
}

const char* MsDeformCudaErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace gatescope::ops
