// Standalone check of the CUDA DAR attention kernel against the streaming CPU kernel.
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
#include "gatescope/ops/dar_cpu_kernel.h"
#include "gatescope/ops/dar_cuda_kernel.h"

namespace gatescope::ops {
namespace {

using testing::FromDevice;
using testing::HaveDevice;
using testing::RoundToHalf;
using testing::ToDevice;

struct Dims {
  int64_t batch, heads, nq, nk, d, dv;
};

enum class MaskKind { kNone, kPadding, kCausal, kPaddingCausal };

struct Settings {
  MaskKind mask;
  float lam, rho, alpha, beta;
  int steps;
};

struct Problem {
  DarShape shape;
  std::vector<float> q, k, v;
  std::vector<uint8_t> mask;  // empty = no mask
};

void PrintTo(const Dims& d, std::ostream* os) {
  *os << "[B=" << d.batch << " H=" << d.heads << " Nq=" << d.nq << " Nk=" << d.nk << " d=" << d.d
      << " dv=" << d.dv << "]";
}

void PrintTo(const Settings& s, std::ostream* os) {
  *os << "[mask=" << static_cast<int>(s.mask) << " lam=" << s.lam << " rho=" << s.rho
      << " alpha=" << s.alpha << " beta=" << s.beta << " steps=" << s.steps << "]";
}

bool Padded(MaskKind m) { return m == MaskKind::kPadding || m == MaskKind::kPaddingCausal; }
bool Causal(MaskKind m) { return m == MaskKind::kCausal || m == MaskKind::kPaddingCausal; }

Problem MakeProblem(const Dims& dims, const Settings& set, unsigned seed) {
  Problem p;
  DarShape& s = p.shape;
  s.batch = dims.batch;
  s.heads = dims.heads;
  s.nq = dims.nq;
  s.nk = dims.nk;
  s.d = dims.d;
  s.dv = dims.dv;
  s.scale = 1.0 / std::sqrt(static_cast<double>(dims.d));
  s.lam = set.lam;
  s.rho = set.rho;
  s.alpha = set.alpha;
  s.beta = set.beta;
  s.steps = set.steps;
  s.causal = Causal(set.mask);
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
  if (Padded(set.mask)) {
    // Batch 0: key 0 and a tail are padding, so under the causal mask row 0 sees no key.
    // Batch 1 (if any): every key is padding, so every row is fully masked.
    // Later batches: a random half of the keys.
    p.mask.assign(dims.batch * dims.nk, 1);
    std::bernoulli_distribution coin(0.5);
    for (int64_t b = 0; b < dims.batch; ++b) {
      for (int64_t j = 0; j < dims.nk; ++j) {
        uint8_t& m = p.mask[b * dims.nk + j];
        if (b == 0) m = (j == 0 || j >= dims.nk - dims.nk / 4) ? 0 : 1;
        if (b == 1) m = 0;
        if (b >= 2) m = coin(rng) ? 1 : 0;
      }
    }
  }
  return p;
}

void RoundInputsToHalf(Problem& p) {
  for (auto* x : {&p.q, &p.k, &p.v}) RoundToHalf(*x);
}

struct Result {
  std::vector<float> out, row_stats;
};

Result CpuReference(const Problem& p) {
  const DarShape& s = p.shape;
  Result r;
  r.out.resize(s.batch * s.heads * s.nq * s.dv);
  r.row_stats.resize(s.batch * s.heads * s.nq * 2);
  DarPointers<float> ptr;
  ptr.q = p.q.data();
  ptr.k = p.k.data();
  ptr.v = p.v.data();
  ptr.key_mask = p.mask.empty() ? nullptr : p.mask.data();
  ptr.out = r.out.data();
  ptr.row_stats = r.row_stats.data();
  DarForward<float, double>(s, ptr);
  return r;
}

// Per row, the visible pairs whose cosine (in double) lies within 1e-5 of rho. The kernel
// and the reference compute the cosine in different precisions and summation orders, so
// such a pair may land on either side of rho: the crossing counts may differ by at most
// this many (almost always 0, occasionally 1). Visible-key counts must match exactly.
std::vector<int> AmbiguousCrossings(const Problem& p) {
  const DarShape& s = p.shape;
  std::vector<int> slack(s.batch * s.heads * s.nq, 0);
  auto norm = [](const float* x, int64_t n) {
    double ss = 0;
    for (int64_t c = 0; c < n; ++c) ss += double(x[c]) * x[c];
    return std::sqrt(ss) + kDarNormEps;
  };
  for (int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
    const int64_t b = bh / s.heads;
    for (int64_t i = 0; i < s.nq; ++i) {
      const float* qi = p.q.data() + (bh * s.nq + i) * s.d;
      const double qn = norm(qi, s.d);
      for (int64_t j = 0; j < s.nk; ++j) {
        if (s.causal && j > i) break;
        if (!p.mask.empty() && p.mask[b * s.nk + j] == 0) continue;
        const float* kj = p.k.data() + (bh * s.nk + j) * s.d;
        double dot = 0;
        for (int64_t c = 0; c < s.d; ++c) dot += double(qi[c]) * kj[c];
        const double cosine = dot / (qn * norm(kj, s.d));
        if (std::fabs(cosine - s.rho) < 1e-5) ++slack[bh * s.nq + i];
      }
    }
  }
  return slack;
}

// Copies host values (converted to T) to a new device buffer.
template <typename T>
Result RunCuda(const Problem& p, DarDType dtype) {
  const DarShape& s = p.shape;
  void* q = ToDevice<T>(p.q);
  void* k = ToDevice<T>(p.k);
  void* v = ToDevice<T>(p.v);
  void* mask = p.mask.empty() ? nullptr : ToDevice<uint8_t>(p.mask);
  const size_t out_size = s.batch * s.heads * s.nq * s.dv;
  const size_t stats_size = s.batch * s.heads * s.nq * 2;
  void* out = nullptr;
  float* stats = nullptr;
  EXPECT_EQ(cudaMalloc(&out, out_size * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&stats, stats_size * sizeof(float)), cudaSuccess);
  // Poison both outputs: the kernel must write every element.
  EXPECT_EQ(cudaMemset(out, 0x7f, out_size * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(stats, 0x7f, stats_size * sizeof(float)), cudaSuccess);
  EXPECT_EQ(
      LaunchDarForward(s, dtype, q, k, v, static_cast<const uint8_t*>(mask), out, stats, nullptr),
      0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Result r;
  r.out = FromDevice<T>(out, out_size);
  r.row_stats.resize(stats_size);
  EXPECT_EQ(
      cudaMemcpy(r.row_stats.data(), stats, stats_size * sizeof(float), cudaMemcpyDeviceToHost),
      cudaSuccess);
  for (void* ptr : {q, k, v, mask, out, static_cast<void*>(stats)}) {
    if (ptr != nullptr) cudaFree(ptr);
  }
  return r;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(double(a[i]) - b[i]);
    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
  }
  return worst;
}

void ExpectRowStatsMatch(const Problem& p, const Result& gpu, const Result& cpu) {
  const std::vector<int> slack = AmbiguousCrossings(p);
  int mismatches = 0;
  for (size_t row = 0; row < slack.size(); ++row) {
    const float gpu_cross = gpu.row_stats[2 * row], cpu_cross = cpu.row_stats[2 * row];
    const float gpu_vis = gpu.row_stats[2 * row + 1], cpu_vis = cpu.row_stats[2 * row + 1];
    const bool ok = gpu_vis == cpu_vis && std::fabs(gpu_cross - cpu_cross) <= slack[row];
    if (!ok && ++mismatches <= 5) {
      ADD_FAILURE() << "row " << row << ": crossings " << gpu_cross << " vs " << cpu_cross
                    << " (slack " << slack[row] << "), visible " << gpu_vis << " vs " << cpu_vis;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Rows without a visible key must be exactly zero.
void ExpectEmptyRowsZero(const Problem& p, const Result& gpu) {
  const DarShape& s = p.shape;
  for (int64_t row = 0; row < s.batch * s.heads * s.nq; ++row) {
    if (gpu.row_stats[2 * row + 1] != 0.f) continue;
    for (int64_t c = 0; c < s.dv; ++c) {
      ASSERT_EQ(gpu.out[row * s.dv + c], 0.f) << "fully masked row " << row;
    }
  }
}

using Param = std::tuple<Dims, Settings>;

class DarKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(DarKernelTest, Float32MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const auto& [dims, set] = GetParam();
  const Problem p = MakeProblem(dims, set, 7);
  const Result gpu = RunCuda<float>(p, DarDType::kFloat32), cpu = CpuReference(p);
  EXPECT_LT(MaxAbsDiff(gpu.out, cpu.out), 1e-4);
  ExpectRowStatsMatch(p, gpu, cpu);
  ExpectEmptyRowsZero(p, gpu);
}

TEST_P(DarKernelTest, Float16MatchesCpu) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const auto& [dims, set] = GetParam();
  Problem p = MakeProblem(dims, set, 11);
  // Compare against the reference on the same half-rounded inputs.
  RoundInputsToHalf(p);
  const Result gpu = RunCuda<__half>(p, DarDType::kFloat16), cpu = CpuReference(p);
  EXPECT_LT(MaxAbsDiff(gpu.out, cpu.out), 2e-3);
  ExpectRowStatsMatch(p, gpu, cpu);
  ExpectEmptyRowsZero(p, gpu);
}

// nk = 17, 70, 257 and nq = 1, 17, 100, 130 are not multiples of the kernel's tiles; nq !=
// nk covers cross attention (with the causal mask too: key j is visible to row i iff
// j <= i).
const Dims kDims[] = {
    {1, 1, 1, 1, 8, 16},      {2, 3, 17, 17, 8, 16},   {3, 2, 33, 70, 16, 16},
    {2, 2, 197, 197, 32, 64}, {4, 1, 100, 45, 64, 64}, {1, 2, 130, 257, 128, 128},
};

// alpha * beta / 4 = 0.8 < 1 for the two-step cases. rho = 0.15 makes crossings common
// even for d = 128 (cosine spread about 1 / sqrt(d)).
const Settings kSettings[] = {
    {MaskKind::kNone, 0.f, 0.5f, 8.f, 0.f, 1},
    {MaskKind::kNone, 1.5f, 0.15f, 8.f, 0.f, 1},
    {MaskKind::kPadding, 0.f, 0.15f, 8.f, 0.f, 1},
    {MaskKind::kCausal, 2.f, 0.15f, 8.f, 0.f, 1},
    {MaskKind::kPaddingCausal, 1.f, 0.15f, 8.f, 0.4f, 2},
    {MaskKind::kNone, 0.75f, 0.3f, 6.f, 0.5f, 2},
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [dims, set] = info.param;
  static const char* const kMasks[] = {"nomask", "padding", "causal", "paddingcausal"};
  return "b" + std::to_string(dims.batch) + "h" + std::to_string(dims.heads) + "q" +
         std::to_string(dims.nq) + "k" + std::to_string(dims.nk) + "d" + std::to_string(dims.d) +
         "v" + std::to_string(dims.dv) + "_" + kMasks[static_cast<int>(set.mask)] + "_steps" +
         std::to_string(set.steps) + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DarKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kDims),
                                            ::testing::ValuesIn(kSettings)),
                         Name);

TEST(DarKernelLaunch, EmptyKeysGiveZeroRows) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  Problem p = MakeProblem({2, 2, 5, 0, 16, 16}, {MaskKind::kNone, 1.f, 0.5f, 8.f, 0.f, 1}, 3);
  const Result gpu = RunCuda<float>(p, DarDType::kFloat32);
  for (float x : gpu.out) EXPECT_EQ(x, 0.f);
  for (float x : gpu.row_stats) EXPECT_EQ(x, 0.f);
}

TEST(DarKernelLaunch, RejectsInvalidShapes) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  DarShape shape;
  shape.batch = 1;
  shape.heads = 1;
  shape.nq = 4;
  shape.nk = 4;
  shape.d = kDarCudaMaxHeadDim + 1;
  shape.dv = 8;
  EXPECT_NE(LaunchDarForward(shape, DarDType::kFloat32, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr),
            0);
  shape.d = 8;
  shape.dv = kDarCudaMaxHeadDim + 1;
  EXPECT_NE(LaunchDarForward(shape, DarDType::kFloat32, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr),
            0);
  shape.dv = 8;
  shape.steps = 0;
  EXPECT_NE(LaunchDarForward(shape, DarDType::kFloat32, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace gatescope::ops
