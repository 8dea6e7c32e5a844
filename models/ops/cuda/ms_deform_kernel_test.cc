// Standalone check of the CUDA multi-scale deformable attention kernel against the CPU
// kernel header. Skips (does not pass vacuously) when no CUDA device is present.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_test_support.h"
#include "gatescope/ops/ms_deform_cpu_kernel.h"
#include "gatescope/ops/ms_deform_cuda_kernel.h"

namespace gatescope::ops {
namespace {

using testing::FromDevice;
using testing::HaveDevice;

struct Dims {
  int64_t batch, heads, channels, queries, points;
  std::vector<std::pair<int64_t, int64_t>> levels;  // (H, W)
};

void PrintTo(const Dims& d, std::ostream* os) {
  *os << "[N=" << d.batch << " M=" << d.heads << " D=" << d.channels << " Lq=" << d.queries
      << " P=" << d.points << " levels=";
  for (const auto& [h, w] : d.levels) *os << h << "x" << w << ",";
  *os << "]";
}

struct Problem {
  MsDeformShape shape;
  std::vector<int64_t> spatial_shapes, level_start;
  std::vector<double> value, locations, weights;
};

// Values in [-1, 1]; locations in [-0.2, 1.2] so that some points fall partly or wholly
// outside their map, plus exact pixel centres and edges; attention weights positive and
// normalised per (query, head) as the model's softmax does.
Problem MakeProblem(const Dims& dims, unsigned seed) {
  Problem p;
  MsDeformShape& s = p.shape;
  s.batch = dims.batch;
  s.heads = dims.heads;
  s.channels = dims.channels;
  s.queries = dims.queries;
  s.points = dims.points;
  s.levels = static_cast<int64_t>(dims.levels.size());
  for (const auto& [h, w] : dims.levels) {
    p.level_start.push_back(s.spatial);
    p.spatial_shapes.push_back(h);
    p.spatial_shapes.push_back(w);
    s.spatial += h * w;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> sym(-1.0, 1.0), loc(-0.2, 1.2), pos(1e-3, 1.0);
  p.value.resize(s.batch * s.spatial * s.heads * s.channels);
  for (double& e : p.value) e = sym(rng);
  const int64_t lp = s.levels * s.points;
  const int64_t slots = s.batch * s.queries * s.heads;
  p.locations.resize(slots * lp * 2);
  p.weights.resize(slots * lp);
  for (int64_t i = 0; i < slots; ++i) {
    double total = 0;
    for (int64_t j = 0; j < lp; ++j) {
      const int64_t l = j / s.points;
      double* xy = p.locations.data() + (i * lp + j) * 2;
      xy[0] = loc(rng);
      xy[1] = loc(rng);
      if ((i + j) % 7 == 0) {
        // A pixel centre or an edge of the map (integer or half-integer pixel coordinate).
        const double h = static_cast<double>(p.spatial_shapes[2 * l]);
        const double w = static_cast<double>(p.spatial_shapes[2 * l + 1]);
        xy[0] = std::floor(xy[0] * w) / w;
        xy[1] = (std::floor(xy[1] * h) + 0.5) / h;
      }
      p.weights[i * lp + j] = pos(rng);
      total += p.weights[i * lp + j];
    }
    for (int64_t j = 0; j < lp; ++j) p.weights[i * lp + j] /= total;
  }
  return p;
}

// Rounds every floating input to T and back, so the CPU reference sees the device's values.
template <typename T>
void RoundTo(Problem& p) {
  for (auto* x : {&p.value, &p.locations, &p.weights}) {
    for (double& e : *x) e = static_cast<double>(static_cast<float>(static_cast<T>(e)));
  }
}

// The CPU kernel in double on the (already rounded) inputs.
std::vector<double> CpuReference(const Problem& p) {
  const MsDeformShape& s = p.shape;
  std::vector<double> out(s.batch * s.queries * s.heads * s.channels);
  MsDeformPointers<double> ptr;
  ptr.value = p.value.data();
  ptr.spatial_shapes = p.spatial_shapes.data();
  ptr.level_start = p.level_start.data();
  ptr.sampling_locations = p.locations.data();
  ptr.attention_weights = p.weights.data();
  ptr.out = out.data();
  MsDeformForward<double, double>(s, ptr);
  return out;
}

// Copies host values (converted to T) to a new device buffer of `offset` + size elements
// and returns the address `offset` elements in (offset 1 misaligns vector accesses).
template <typename T, typename Src>
T* ToDevice(const std::vector<Src>& host, std::vector<void*>& owned, int offset = 0) {
  std::vector<T> staged(host.size());
  for (size_t i = 0; i < host.size(); ++i) staged[i] = static_cast<T>(host[i]);
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, (std::max<size_t>(staged.size(), 1) + offset) * sizeof(T)),
            cudaSuccess);
  owned.push_back(dev);
  T* start = static_cast<T*>(dev) + offset;
  EXPECT_EQ(cudaMemcpy(start, staged.data(), staged.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return start;
}

template <typename T>
std::vector<double> RunCuda(const Problem& p, MsDeformDType dtype, int offset = 0) {
  const MsDeformShape& s = p.shape;
  std::vector<void*> owned;
  const T* value = ToDevice<T>(p.value, owned, offset);
  const int64_t* shapes = ToDevice<int64_t>(p.spatial_shapes, owned);
  const int64_t* starts = ToDevice<int64_t>(p.level_start, owned);
  const T* locations = ToDevice<T>(p.locations, owned);
  const T* weights = ToDevice<T>(p.weights, owned);
  const size_t out_size = s.batch * s.queries * s.heads * s.channels;
  void* out_buffer = nullptr;
  EXPECT_EQ(cudaMalloc(&out_buffer, (out_size + offset) * sizeof(T)), cudaSuccess);
  owned.push_back(out_buffer);
  T* out = static_cast<T*>(out_buffer) + offset;
  // Poison the output: the kernel must write every element.
  EXPECT_EQ(cudaMemset(out_buffer, 0x7f, (out_size + offset) * sizeof(T)), cudaSuccess);
  EXPECT_EQ(
      LaunchMsDeformForward(s, dtype, value, shapes, starts, locations, weights, out, nullptr),
      0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> result = FromDevice<T, double>(out, out_size);
  for (void* ptr : owned) cudaFree(ptr);
  return result;
}

double MaxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(a[i] - b[i]);
    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
  }
  return worst;
}

class MsDeformKernelTest : public ::testing::TestWithParam<Dims> {};

TEST_P(MsDeformKernelTest, Float32MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  Problem p = MakeProblem(GetParam(), 7);
  RoundTo<float>(p);
  EXPECT_LT(MaxAbsDiff(RunCuda<float>(p, MsDeformDType::kFloat32), CpuReference(p)), 1e-5);
}

TEST_P(MsDeformKernelTest, Float32MisalignedMatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  Problem p = MakeProblem(GetParam(), 8);
  RoundTo<float>(p);
  // value and out one element off a 16-byte boundary: the scalar path.
  EXPECT_LT(MaxAbsDiff(RunCuda<float>(p, MsDeformDType::kFloat32, 1), CpuReference(p)), 1e-5);
}

TEST_P(MsDeformKernelTest, Float16MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  Problem p = MakeProblem(GetParam(), 11);
  // Compare against the reference on the same half-rounded inputs; the output is rounded
  // to half (|out| <= 1 here, so half an ulp is at most 2^-12).
  RoundTo<__half>(p);
  EXPECT_LT(MaxAbsDiff(RunCuda<__half>(p, MsDeformDType::kFloat16), CpuReference(p)), 1e-3);
}

TEST_P(MsDeformKernelTest, Float64MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Problem p = MakeProblem(GetParam(), 13);
  EXPECT_LT(MaxAbsDiff(RunCuda<double>(p, MsDeformDType::kFloat64), CpuReference(p)), 1e-12);
}

// The public Deformable-DETR test shapes (N, M, D = 1, 2, 2; Lq, L, P = 2, 2, 2; levels
// 6x4 and 3x2), odd and even channel counts (every vector width), a 1x1 level, and the
// realistic decoder case (300 queries, 8 heads, 32 channels, 4 levels, 4 points).
const Dims kDims[] = {
    {1, 2, 2, 2, 2, {{6, 4}, {3, 2}}},
    {1, 2, 30, 2, 2, {{6, 4}, {3, 2}}},
    {1, 2, 32, 2, 2, {{6, 4}, {3, 2}}},
    {1, 2, 64, 2, 2, {{6, 4}, {3, 2}}},
    {1, 2, 71, 2, 2, {{6, 4}, {3, 2}}},
    {3, 3, 8, 17, 3, {{5, 7}, {1, 1}, {2, 9}}},
    {2, 8, 32, 300, 4, {{32, 32}, {16, 16}, {8, 8}, {4, 4}}},
};

std::string Name(const ::testing::TestParamInfo<Dims>& info) {
  const Dims& d = info.param;
  return "n" + std::to_string(d.batch) + "m" + std::to_string(d.heads) + "d" +
         std::to_string(d.channels) + "q" + std::to_string(d.queries) + "l" +
         std::to_string(d.levels.size()) + "p" + std::to_string(d.points);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MsDeformKernelTest, ::testing::ValuesIn(kDims), Name);

TEST(MsDeformKernelLaunch, PointsOutsideEveryMapGiveZero) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  Problem p = MakeProblem({1, 2, 4, 5, 2, {{4, 4}, {2, 2}}}, 3);
  for (size_t i = 0; i < p.locations.size(); ++i) {
    // Far out, and just beyond the reach of the border pixels of the coarser (2x2) map:
    // its bilinear support ends at -0.5 / 2 and 1 + 0.5 / 2.
    const double far[] = {-3.0, 2.5, 1.25 + 1e-6, -0.25 - 1e-6};
    p.locations[i] = far[i % 4];
  }
  for (double e : RunCuda<float>(p, MsDeformDType::kFloat32)) EXPECT_EQ(e, 0.0);
}

// A non-finite location, or a non-finite weight on a point outside its map, makes that
// (query, head) NaN, as grid_sample and the reference's weighting do; the others stay exact.
TEST(MsDeformKernelLaunch, NonFiniteInputsPropagateLikeCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  Problem p = MakeProblem({1, 2, 4, 3, 2, {{4, 4}, {2, 2}}}, 5);
  const int64_t lp = 4;  // levels * points
  p.locations[(0 * lp + 1) * 2] = NAN;          // query 0, head 0
  p.locations[(3 * lp + 2) * 2 + 1] = INFINITY;  // query 1, head 1
  p.locations[(4 * lp + 3) * 2] = -2.0;         // query 2, head 0: outside, weight NaN
  p.weights[4 * lp + 3] = NAN;
  RoundTo<float>(p);
  const std::vector<double> gpu = RunCuda<float>(p, MsDeformDType::kFloat32),
                            cpu = CpuReference(p);
  for (size_t i = 0; i < gpu.size(); ++i) {
    const int64_t slot = static_cast<int64_t>(i) / 4;
    const bool poisoned = slot == 0 || slot == 3 || slot == 4;
    EXPECT_EQ(std::isnan(gpu[i]), poisoned) << i;
    EXPECT_EQ(std::isnan(cpu[i]), poisoned) << i;
    if (!poisoned) {
      EXPECT_NEAR(gpu[i], cpu[i], 1e-5) << i;
    }
  }
}

TEST(MsDeformKernelLaunch, EmptyProblemsAndBadShapes) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  MsDeformShape s;
  s.batch = 0;
  s.heads = 2;
  s.channels = 4;
  s.queries = 3;
  EXPECT_EQ(LaunchMsDeformForward(s, MsDeformDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr),
            0);
  s.batch = 1;
  s.points = -1;
  EXPECT_NE(LaunchMsDeformForward(s, MsDeformDType::kFloat32, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace gatescope::ops
