// Standalone check of the CUDA GDLA kernels against the CPU kernel header.
// Skips (does not pass vacuously) when no CUDA device is present.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_support.h"
#include "gatescope/ops/gdla_cpu_kernel.h"
#include "gatescope/ops/gdla_cuda_kernel.h"

namespace gatescope::ops {
namespace {

using testing::FromDevice;
using testing::HaveDevice;
using testing::MaxScaledDiff;
using testing::RoundToHalf;
using testing::ToDevice;

struct Dims {
  int64_t batch, heads, n, dim;
};

struct Settings {
  GdlaGate gate;
  bool weight;
  float eps;
};

struct Problem {
  GdlaShape shape;
  std::vector<float> q, k, v, g, lam, weight;  // weight empty = none
};

void PrintTo(const Dims& d, std::ostream* os) {
  *os << "[B=" << d.batch << " H=" << d.heads << " N=" << d.n << " D=" << d.dim << "]";
}

void PrintTo(const Settings& s, std::ostream* os) {
  *os << "[gate=" << static_cast<int>(s.gate) << " weight=" << s.weight << " eps=" << s.eps
      << "]";
}

Problem MakeProblem(const Dims& dims, const Settings& set, unsigned seed) {
  Problem p;
  GdlaShape& s = p.shape;
  s.batch = dims.batch;
  s.heads = dims.heads;
  s.n = dims.n;
  s.dim = dims.dim;
  s.eps = set.eps;
  s.gate = set.gate;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, int64_t size, float mean, float sd) {
    x.resize(size);
    for (float& e : x) e = mean + sd * normal(rng);
  };
  const int64_t size = dims.batch * dims.heads * dims.n * dims.dim;
  fill(p.q, size, 0.f, 1.f);
  fill(p.k, size, 0.f, 1.f);
  fill(p.v, size, 0.f, 1.f);
  fill(p.g, size, 0.f, 1.5f);
  fill(p.lam, dims.heads * dims.dim, 0.3f, 0.5f);
  if (set.weight) fill(p.weight, dims.dim, 1.f, 0.2f);
  return p;
}

void RoundInputsToHalf(Problem& p) {
  for (auto* x : {&p.q, &p.k, &p.v, &p.g}) RoundToHalf(*x);
}

std::vector<float> CpuReference(const Problem& p) {
  std::vector<float> out(p.q.size());
  GdlaPointers<float> ptr;
  ptr.q = p.q.data();
  ptr.k = p.k.data();
  ptr.v = p.v.data();
  ptr.g = p.g.data();
  ptr.lam = p.lam.data();
  ptr.norm_weight = p.weight.empty() ? nullptr : p.weight.data();
  ptr.out = out.data();
  GdlaForward<float, double>(p.shape, ptr);
  return out;
}

// Copies host values (converted to T) to a new device buffer; null for an empty vector.
template <typename T>
std::vector<float> RunCuda(const Problem& p, GdlaDType dtype) {
  const size_t size = p.q.size();
  void* q = ToDevice<T>(p.q);
  void* k = ToDevice<T>(p.k);
  void* v = ToDevice<T>(p.v);
  void* g = ToDevice<T>(p.g);
  void* lam = ToDevice<float>(p.lam);
  void* weight = p.weight.empty() ? nullptr : ToDevice<float>(p.weight);  // none: no weight
  void* out = nullptr;
  float* workspace = nullptr;
  const int64_t workspace_floats = GdlaCudaWorkspaceFloats(p.shape);
  EXPECT_EQ(cudaMalloc(&out, std::max<size_t>(size, 1) * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&workspace, std::max<int64_t>(workspace_floats, 1) * sizeof(float)),
            cudaSuccess);
  // Poison the output and the workspace: the kernels must write every element they read.
  EXPECT_EQ(cudaMemset(out, 0x7f, size * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(workspace, 0x7f, workspace_floats * sizeof(float)), cudaSuccess);
  EXPECT_EQ(LaunchGdlaForward(p.shape, dtype, q, k, v, g, static_cast<const float*>(lam),
                              static_cast<const float*>(weight), out, workspace, nullptr),
            0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> result = FromDevice<T>(out, size);
  for (void* ptr : {q, k, v, g, lam, weight, out, static_cast<void*>(workspace)}) {
    if (ptr != nullptr) cudaFree(ptr);
  }
  return result;
}

// Largest |a - b| / max(1, |b|): absolute below 1, relative above (the gated outputs reach
using Param = std::tuple<Dims, Settings>;

class GdlaKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(GdlaKernelTest, Float32MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const auto& [dims, set] = GetParam();
  const Problem p = MakeProblem(dims, set, 7);
  EXPECT_LT(MaxScaledDiff(RunCuda<float>(p, GdlaDType::kFloat32), CpuReference(p)), 1e-4);
}

TEST_P(GdlaKernelTest, Float16MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const auto& [dims, set] = GetParam();
  Problem p = MakeProblem(dims, set, 11);
  // Compare against the reference on the same half-rounded inputs.
  RoundInputsToHalf(p);
  EXPECT_LT(MaxScaledDiff(RunCuda<__half>(p, GdlaDType::kFloat16), CpuReference(p)), 2e-3);
}

// n = 1, 17, 130, 197, 1000, 3136 are not multiples of the row tile (64), the staged key
// tile (32) or the split length; 1000 and 3136 take several splits (reduce kernel).
// D = 8, 24 sit below their head-dim bucket; D = 128 needs over 48 KB of shared memory.
const Dims kDims[] = {
    {1, 1, 1, 8},    {2, 3, 17, 16},   {1, 2, 130, 32},  {2, 2, 197, 64},
    {1, 1, 1000, 24}, {1, 2, 3136, 32}, {1, 1, 300, 128},
};

const Settings kSettings[] = {
    {GdlaGate::kSigmoid, true, 1e-5f},
    {GdlaGate::kSilu, true, 1e-5f},
    {GdlaGate::kNone, false, 1e-5f},
    {GdlaGate::kSigmoid, false, 1e-3f},
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [dims, set] = info.param;
  static const char* const kGates[] = {"sigmoid", "silu", "none"};
  return "b" + std::to_string(dims.batch) + "h" + std::to_string(dims.heads) + "n" +
         std::to_string(dims.n) + "d" + std::to_string(dims.dim) + "_" +
         kGates[static_cast<int>(set.gate)] + (set.weight ? "_weight" : "") + "_" +
         std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GdlaKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kDims),
                                            ::testing::ValuesIn(kSettings)),
                         Name);

TEST(GdlaKernelLaunch, NoTokensIsANoOp) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  GdlaShape shape;
  shape.batch = 2;
  shape.heads = 2;
  shape.n = 0;
  shape.dim = 16;
  EXPECT_EQ(GdlaCudaWorkspaceFloats(shape), 0);
  EXPECT_EQ(LaunchGdlaForward(shape, GdlaDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr, nullptr, nullptr),
            0);
}

TEST(GdlaKernelLaunch, RejectsInvalidShapes) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  GdlaShape shape;
  shape.batch = 1;
  shape.heads = 1;
  shape.n = 4;
  for (int64_t dim : {int64_t{0}, int64_t{7}, kGdlaCudaMaxHeadDim + 2}) {
    shape.dim = dim;
    EXPECT_NE(LaunchGdlaForward(shape, GdlaDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                                nullptr, nullptr, nullptr, nullptr, nullptr),
              0)
        << "dim " << dim;
  }
  shape.dim = 16;
  shape.gate = static_cast<GdlaGate>(3);
  EXPECT_NE(LaunchGdlaForward(shape, GdlaDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace gatescope::ops
