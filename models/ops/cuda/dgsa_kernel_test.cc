// Standalone check of the CUDA M-DGSA kernel against the streaming CPU kernel.
// Skips (does not pass vacuously) when no CUDA device is present.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernel_test_support.h"
#include "gatescope/ops/dgsa_cpu_kernel.h"
#include "gatescope/ops/dgsa_cuda_kernel.h"

namespace gatescope::ops {
namespace {

using testing::FromDevice;
using testing::HaveDevice;
using testing::ToDevice;

struct Problem {
  DgsaShape shape;
  std::vector<float> q_pos, k_pos, q_neg, k_neg, v, gate;
  std::vector<uint8_t> mask;  // [bh / heads, nk]; empty = no mask
};

Problem MakeProblem(int64_t bh, int64_t n, int64_t d, int64_t dv, unsigned seed) {
  Problem p;
  p.shape = {bh, n, n, d, dv, 1.0 / std::sqrt(static_cast<double>(d)), 1};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, size_t size) {
    x.resize(size);
    for (float& e : x) e = normal(rng);
  };
  fill(p.q_pos, bh * n * d);
  fill(p.k_pos, bh * n * d);
  fill(p.q_neg, bh * n * d);
  fill(p.k_neg, bh * n * d);
  fill(p.v, bh * n * dv);
  p.gate.resize(bh * n);
  for (float& g : p.gate) g = unit(rng);
  return p;
}

// batch x heads slices with a key padding mask: batch 0 keeps a prefix of 5 keys (whole
// key tiles of padding), batch 1 hides every key (rows must be exactly 0), batch 2 a random
// half, batch 3 and later keep a random prefix of at least one key.
Problem MakeMaskedProblem(int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t dv,
                          unsigned seed) {
  Problem p = MakeProblem(batch * heads, n, d, dv, seed);
  p.shape.heads = heads;
  std::mt19937 rng(seed + 1);
  std::bernoulli_distribution coin(0.5);
  std::uniform_int_distribution<int64_t> length(1, n);
  p.mask.assign(batch * n, 1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t keep = b == 0 ? std::min<int64_t>(5, n) : (b == 1 ? 0 : length(rng));
    for (int64_t j = 0; j < n; ++j) {
      p.mask[b * n + j] = b == 2 ? (coin(rng) ? 1 : 0) : (j < keep ? 1 : 0);
    }
  }
  return p;
}

std::vector<float> CpuReference(const Problem& p) {
  std::vector<float> out(p.shape.batch_heads * p.shape.nq * p.shape.dv);
  DgsaPointers<float> ptr{p.q_pos.data(), p.k_pos.data(), p.q_neg.data(),
                          p.k_neg.data(), p.v.data(),     p.gate.data(),
                          out.data(),     p.mask.empty() ? nullptr : p.mask.data()};
  DgsaForward<float, double>(p.shape, ptr);
  return out;
}

// Copies host values (converted to T) to a new device buffer.
template <typename T>
std::vector<float> RunCuda(const Problem& p, DgsaDType dtype) {
  const std::vector<const std::vector<float>*> inputs = {&p.q_pos, &p.k_pos, &p.q_neg,
                                                         &p.k_neg, &p.v,     &p.gate};
  std::vector<void*> dev;
  for (const auto* in : inputs) dev.push_back(ToDevice<T>(*in));
  void* mask = p.mask.empty() ? nullptr : ToDevice<uint8_t>(p.mask);
  const size_t out_size = p.shape.batch_heads * p.shape.nq * p.shape.dv;
  void* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, out_size * sizeof(T)), cudaSuccess);
  // Poison the output: the kernel must write every element (fully masked rows included).
  EXPECT_EQ(cudaMemset(out, 0x7f, out_size * sizeof(T)), cudaSuccess);
  EXPECT_EQ(LaunchDgsaForward(p.shape, dtype, dev[0], dev[1], dev[2], dev[3], dev[4], dev[5],
                              static_cast<const uint8_t*>(mask), out, nullptr),
            0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> result = FromDevice<T>(out, out_size);
  for (void* ptr : dev) cudaFree(ptr);
  if (mask != nullptr) cudaFree(mask);
  cudaFree(out);
  return result;
}

// Largest |a - b|; NaN counts as infinitely wrong.
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(double(a[i]) - b[i]);
    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
  }
  return worst;
}

struct Case {
  int64_t bh, n, d, dv;
};

class DgsaKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(DgsaKernelTest, Float32MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  const Problem p = MakeProblem(c.bh, c.n, c.d, c.dv, 7);
  EXPECT_LT(MaxAbsDiff(RunCuda<float>(p, DgsaDType::kFloat32), CpuReference(p)), 1e-4);
}

TEST_P(DgsaKernelTest, Float16MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  Problem p = MakeProblem(c.bh, c.n, c.d, c.dv, 11);
  // Compare against the reference on the same half-rounded inputs.
  for (auto* x : {&p.q_pos, &p.k_pos, &p.q_neg, &p.k_neg, &p.v, &p.gate}) {
    for (float& e : *x) e = static_cast<float>(static_cast<__half>(e));
  }
  EXPECT_LT(MaxAbsDiff(RunCuda<__half>(p, DgsaDType::kFloat16), CpuReference(p)), 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DgsaKernelTest,
                         ::testing::Values(Case{1, 1, 8, 16}, Case{3, 17, 8, 16},
                                           Case{2, 197, 32, 64}, Case{2, 100, 64, 64},
                                           Case{1, 257, 128, 128}, Case{8, 1024, 16, 32}));

struct MaskedCase {
  int64_t batch, heads, n, d, dv;
};

class DgsaMaskedKernelTest : public ::testing::TestWithParam<MaskedCase> {};

TEST_P(DgsaMaskedKernelTest, Float32MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const MaskedCase c = GetParam();
  const Problem p = MakeMaskedProblem(c.batch, c.heads, c.n, c.d, c.dv, 13);
  const std::vector<float> gpu = RunCuda<float>(p, DgsaDType::kFloat32);
  EXPECT_LT(MaxAbsDiff(gpu, CpuReference(p)), 1e-4);
  // Batch 1 sees no key: its rows are exactly 0.
  const size_t slice = c.heads * c.n * c.dv;
  for (size_t i = slice; i < 2 * slice; ++i) ASSERT_EQ(gpu[i], 0.f) << "element " << i;
}

TEST_P(DgsaMaskedKernelTest, Float16MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const MaskedCase c = GetParam();
  Problem p = MakeMaskedProblem(c.batch, c.heads, c.n, c.d, c.dv, 17);
  for (auto* x : {&p.q_pos, &p.k_pos, &p.q_neg, &p.k_neg, &p.v, &p.gate}) {
    for (float& e : *x) e = static_cast<float>(static_cast<__half>(e));
  }
  EXPECT_LT(MaxAbsDiff(RunCuda<__half>(p, DgsaDType::kFloat16), CpuReference(p)), 2e-3);
}

TEST_P(DgsaMaskedKernelTest, AllVisibleMaskEqualsNoMask) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const MaskedCase c = GetParam();
  Problem p = MakeMaskedProblem(c.batch, c.heads, c.n, c.d, c.dv, 19);
  std::fill(p.mask.begin(), p.mask.end(), uint8_t{1});
  const std::vector<float> masked = RunCuda<float>(p, DgsaDType::kFloat32);
  p.mask.clear();
  EXPECT_EQ(masked, RunCuda<float>(p, DgsaDType::kFloat32));
}

INSTANTIATE_TEST_SUITE_P(Shapes, DgsaMaskedKernelTest,
                         ::testing::Values(MaskedCase{4, 2, 37, 8, 16},
                                           MaskedCase{5, 3, 100, 16, 32},
                                           MaskedCase{4, 2, 130, 32, 64},
                                           MaskedCase{4, 1, 70, 12, 20},
                                           MaskedCase{4, 2, 257, 128, 128}));

TEST(DgsaKernelLaunch, RejectsOversizedHeadDim) {
  DgsaShape shape{1, 4, 4, kDgsaCudaMaxHeadDim + 1, 8, 1.0, 1};
  EXPECT_NE(LaunchDgsaForward(shape, DgsaDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr, nullptr, nullptr),
            0);
}

TEST(DgsaKernelLaunch, RejectsMaskWithoutHeads) {
  DgsaShape shape{1, 4, 4, 8, 8, 1.0, 0};
  const uint8_t fake_mask = 1;  // never read: the launch is refused first
  EXPECT_NE(LaunchDgsaForward(shape, DgsaDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, &fake_mask, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace gatescope::ops
