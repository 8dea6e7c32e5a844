// Helpers shared by the CUDA kernel tests (each compares a kernel with its CPU kernel
// header): device detection, staging to and from the device, fp16 rounding and the scaled
// error.
// Test-only; failures are reported through gtest's EXPECT_*.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace gatescope::ops::testing {

inline bool HaveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// `host` converted to T in a new device buffer (at least one element, so an empty input
// still gets a valid pointer); the caller cudaFree()s it.
template <typename T, typename Src>
void* ToDevice(const std::vector<Src>& host) {
  std::vector<T> staged(host.size());
  for (size_t i = 0; i < host.size(); ++i) staged[i] = static_cast<T>(host[i]);
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, std::max<size_t>(staged.size(), 1) * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, staged.data(), staged.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return dev;
}

// `n` elements of T copied back from device buffer `dev` and converted to Dst (fp16
// through float).
template <typename T, typename Dst = float>
std::vector<Dst> FromDevice(const void* dev, size_t n) {
  std::vector<T> staged(n);
  EXPECT_EQ(cudaMemcpy(staged.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<Dst> out(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, __half>) {
      out[i] = static_cast<Dst>(static_cast<float>(staged[i]));
    } else {
      out[i] = static_cast<Dst>(staged[i]);
    }
  }
  return out;
}

// Rounds every value to the nearest fp16, so a CPU reference sees the GPU's fp16 inputs.
inline void RoundToHalf(std::vector<float>& x) {
  for (float& e : x) e = static_cast<float>(static_cast<__half>(e));
}

// Largest |a - b| / max(1, |b|); NaN counts as infinitely wrong.
inline double MaxScaledDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(double(a[i]) - b[i]) / std::max(1.0, std::fabs(double(b[i])));
    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
  }
  return worst;
}

}  // namespace gatescope::ops::testing
