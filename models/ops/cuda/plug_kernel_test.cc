// Standalone check of the CUDA PLuG attention kernel against the streaming CPU kernel.
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
#include "gatescope/ops/plug_cpu_kernel.h"
#include "gatescope/ops/plug_cuda_kernel.h"

namespace gatescope::ops {
namespace {

using testing::FromDevice;
using testing::HaveDevice;
using testing::MaxScaledDiff;
using testing::RoundToHalf;
using testing::ToDevice;

struct Dims {
  int64_t batch, heads, nq, nk, d, dv, dg;
};

// The gating modulation layer and whether G goes through tanh.
struct Gate {
  float w_a, w_b, b_a, b_b;
  bool tanh_gate;
};

struct Problem {
  PlugShape shape;
  std::vector<float> q, k, v, qg, kg;
  std::vector<float> gml;  // {w_a, w_b, b_a, b_b}, as the launcher reads it
};

void PrintTo(const Dims& d, std::ostream* os) {
  *os << "[B=" << d.batch << " H=" << d.heads << " N=" << d.nq << " M=" << d.nk << " d=" << d.d
      << " dv=" << d.dv << " dg=" << d.dg << "]";
}

void PrintTo(const Gate& g, std::ostream* os) {
  *os << "[w=(" << g.w_a << ", " << g.w_b << ") b=(" << g.b_a << ", " << g.b_b
      << ") tanh=" << g.tanh_gate << "]";
}

Problem MakeProblem(const Dims& dims, const Gate& gate, unsigned seed) {
  Problem p;
  PlugShape& s = p.shape;
  s.batch = dims.batch;
  s.heads = dims.heads;
  s.nq = dims.nq;
  s.nk = dims.nk;
  s.d = dims.d;
  s.dv = dims.dv;
  s.dg = dims.dg;
  s.scale = 1.0 / std::sqrt(static_cast<double>(dims.d));
  s.gate_scale = 1.0 / std::sqrt(static_cast<double>(dims.dg));
  s.tanh_gate = gate.tanh_gate;
  s.w_a = gate.w_a;
  s.w_b = gate.w_b;
  s.b_a = gate.b_a;
  s.b_b = gate.b_b;
  p.gml = {gate.w_a, gate.w_b, gate.b_a, gate.b_b};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, int64_t size) {
    x.resize(size);
    for (float& e : x) e = normal(rng);
  };
  const int64_t bh = dims.batch * dims.heads;
  fill(p.q, bh * dims.nq * dims.d);
  fill(p.k, bh * dims.nk * dims.d);
  fill(p.v, bh * dims.nk * dims.dv);
  fill(p.qg, dims.batch * dims.nq * dims.dg);
  fill(p.kg, dims.batch * dims.nk * dims.dg);
  return p;
}

void RoundInputsToHalf(Problem& p) {
  for (auto* x : {&p.q, &p.k, &p.v, &p.qg, &p.kg}) RoundToHalf(*x);
}

std::vector<float> CpuReference(const Problem& p) {
  const PlugShape& s = p.shape;
  std::vector<float> out(s.batch * s.heads * s.nq * s.dv);
  PlugPointers<float> ptr;
  ptr.q = p.q.data();
  ptr.k = p.k.data();
  ptr.v = p.v.data();
  ptr.q_gate = p.qg.data();
  ptr.k_gate = p.kg.data();
  ptr.out = out.data();
  PlugForward<float, double>(s, ptr);
  return out;
}

// Copies host values (converted to T) to a new device buffer.
template <typename T>
std::vector<float> RunCuda(const Problem& p, PlugDType dtype) {
  const PlugShape& s = p.shape;
  void* q = ToDevice<T>(p.q);
  void* k = ToDevice<T>(p.k);
  void* v = ToDevice<T>(p.v);
  void* qg = ToDevice<T>(p.qg);
  void* kg = ToDevice<T>(p.kg);
  void* gml = ToDevice<float>(p.gml);
  const size_t out_size = s.batch * s.heads * s.nq * s.dv;
  void* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, std::max<size_t>(out_size, 1) * sizeof(T)), cudaSuccess);
  // Poison the output: the kernel must write every element.
  EXPECT_EQ(cudaMemset(out, 0x7f, out_size * sizeof(T)), cudaSuccess);
  EXPECT_EQ(LaunchPlugForward(s, dtype, q, k, v, qg, kg, static_cast<const float*>(gml), out,
                              nullptr),
            0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> result = FromDevice<T>(out, out_size);
  for (void* ptr : {q, k, v, qg, kg, gml, out}) cudaFree(ptr);
  return result;
}

using Param = std::tuple<Dims, Gate>;

class PlugKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(PlugKernelTest, Float32MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const auto& [dims, gate] = GetParam();
  const Problem p = MakeProblem(dims, gate, 7);
  EXPECT_LT(MaxScaledDiff(RunCuda<float>(p, PlugDType::kFloat32), CpuReference(p)), 1e-4);
}

TEST_P(PlugKernelTest, Float16MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const auto& [dims, gate] = GetParam();
  Problem p = MakeProblem(dims, gate, 11);
  // Compare against the reference on the same half-rounded inputs.
  RoundInputsToHalf(p);
  EXPECT_LT(MaxScaledDiff(RunCuda<__half>(p, PlugDType::kFloat16), CpuReference(p)), 2e-3);
}

// N = 1, 17, 65, 100, 130, 197 are not multiples of the kernel's 64-row blocks and
// M = 17, 45, 63, 197, 257 not multiples of its 16-key tiles; odd head counts leave the
// second head slot of the last group empty; N != M covers cross attention; d, dv and dg
// differ in several cases (the bucket is their maximum).
const Dims kDims[] = {
    {1, 1, 1, 1, 8, 8, 8},          {2, 3, 17, 17, 16, 16, 16},    {1, 4, 65, 63, 32, 32, 16},
    {2, 6, 197, 197, 64, 64, 64},   {1, 2, 100, 257, 64, 32, 48},  {3, 3, 130, 45, 128, 128, 64},
    {1, 5, 70, 70, 16, 16, 128},
};

const Gate kGates[] = {
    {0.f, 0.f, 0.f, 1.f, true},     // the initial gate: G = 0, plain attention
    {0.6f, -0.8f, 0.2f, 0.9f, true},
    {4.f, -3.f, 0.5f, 1.f, true},   // steep: G saturates at +-1 for most pairs
    {0.3f, 0.25f, 0.1f, 0.5f, false},
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [dims, gate] = info.param;
  return "b" + std::to_string(dims.batch) + "h" + std::to_string(dims.heads) + "q" +
         std::to_string(dims.nq) + "k" + std::to_string(dims.nk) + "d" + std::to_string(dims.d) +
         "v" + std::to_string(dims.dv) + "g" + std::to_string(dims.dg) +
         (gate.tanh_gate ? "_tanh_" : "_notanh_") + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PlugKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kDims),
                                            ::testing::ValuesIn(kGates)),
                         Name);

TEST(PlugKernelLaunch, EmptyKeysGiveZeroRows) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Problem p = MakeProblem({2, 3, 5, 0, 16, 16, 16}, {1.f, 1.f, 0.f, 1.f, true}, 3);
  for (float x : RunCuda<float>(p, PlugDType::kFloat32)) EXPECT_EQ(x, 0.f);
}

TEST(PlugKernelLaunch, RejectsInvalidShapes) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  PlugShape shape;
  shape.batch = 1;
  shape.heads = 1;
  shape.nq = 4;
  shape.nk = 4;
  shape.d = 8;
  shape.dv = 8;
  shape.dg = 8;
  auto launch = [&] {
    return LaunchPlugForward(shape, PlugDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr, nullptr);
  };
  for (int64_t* dim : {&shape.d, &shape.dv, &shape.dg}) {
    *dim = kPlugCudaMaxHeadDim + 1;
    EXPECT_NE(launch(), 0);
    *dim = 0;
    EXPECT_NE(launch(), 0);
    *dim = 8;
  }
}

}  // namespace
}  // namespace gatescope::ops
