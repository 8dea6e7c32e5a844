#include "server/app/blas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace gatescope {
namespace {

// The flags of the 2-vCPU VM where OpenBLAS 0.3.21 chose Prescott (Intel family 6 model
// 207), cut to what matters, and of older and smaller CPUs.
constexpr char kAvx512Bf16[] =
    "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd avx512bw "
    "avx512vl avx512_bf16 avx512_fp16 amx_tile";
constexpr char kAvx512[] =
    "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd avx512bw "
    "avx512vl";
constexpr char kAvx2[] = "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2";
constexpr char kAvxOnly[] = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx";

TEST(BetterOpenBlasCore, ForcesTheWidestKernelsTheCpuRunsOverAGenericChoice) {
  EXPECT_EQ(BetterOpenBlasCore("Prescott", kAvx512Bf16), "Cooperlake");
  EXPECT_EQ(BetterOpenBlasCore("Prescott", kAvx512), "SkylakeX");
  EXPECT_EQ(BetterOpenBlasCore("Prescott", kAvx2), "Haswell");
  // Any pre-AVX2 core, in any case; the flags line as /proc/cpuinfo writes it (leading
  // blank, tabs).
  EXPECT_EQ(BetterOpenBlasCore("CORE2", std::string(" \t") + kAvx2), "Haswell");
  EXPECT_EQ(BetterOpenBlasCore("Nehalem", kAvx512), "SkylakeX");
  EXPECT_EQ(BetterOpenBlasCore("Sandybridge", kAvx512Bf16), "Cooperlake");
  EXPECT_EQ(BetterOpenBlasCore("Unknown", kAvx2), "Haswell");
}

TEST(BetterOpenBlasCore, LeavesACpuWithoutAvx2OrFmaToOpenBlas) {
  EXPECT_EQ(BetterOpenBlasCore("Prescott", kAvxOnly), "");
  EXPECT_EQ(BetterOpenBlasCore("Sandybridge", kAvxOnly), "");
  EXPECT_EQ(BetterOpenBlasCore("Prescott", "avx2 avx512f avx512dq avx512cd avx512bw avx512vl"),
            "");  // no FMA
  EXPECT_EQ(BetterOpenBlasCore("Prescott", ""), "");
  // A flag is a whole word: "avx2" inside another name does not count.
  EXPECT_EQ(BetterOpenBlasCore("Prescott", "xavx2 fma"), "");
}

TEST(BetterOpenBlasCore, KeepsAnAvx2CoreOpenBlasChoseItself) {
  for (const char* core : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "Excavator",
                           "SapphireRapids", "a core a newer OpenBLAS names"}) {
    EXPECT_EQ(BetterOpenBlasCore(core, kAvx512Bf16), "") << core;
  }
  // Partial AVX-512 (no VL) is not enough for SkylakeX's kernels.
  EXPECT_EQ(BetterOpenBlasCore("Prescott", "fma avx2 avx512f avx512dq avx512cd avx512bw"),
            "Haswell");
}

TEST(OpenBlasCoreName, NamesTheCoreOfTheOpenBlasLinkedHere) {
  // scripts/setup.sh installs OpenBLAS as Debian's BLAS, which LibTorch links.
  const std::string core = OpenBlasCoreName();
  ASSERT_FALSE(core.empty());
  EXPECT_TRUE(absl::StartsWith(DescribeBlasCore(), "OpenBLAS core " + core + " ("))
      << DescribeBlasCore();
}

TEST(DescribeBlasCore, SaysWhetherAForcedCoreTook) {
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before == nullptr ? "" : before;
  const std::string core = OpenBlasCoreName();
  ASSERT_FALSE(core.empty());
  // The variable as the loaded OpenBLAS would have read it (any case) ...
  setenv("OPENBLAS_CORETYPE", absl::AsciiStrToUpper(core).c_str(), 1);
  EXPECT_EQ(DescribeBlasCore(),
            "OpenBLAS core " + core + " (OPENBLAS_CORETYPE=" + absl::AsciiStrToUpper(core) + ")");
  // ... and a core it did not take.
  setenv("OPENBLAS_CORETYPE", "NoSuchCore", 1);
  EXPECT_EQ(DescribeBlasCore(), "OpenBLAS core " + core +
                                    " (OPENBLAS_CORETYPE=NoSuchCore, which this OpenBLAS did "
                                    "not take)");
  unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(DescribeBlasCore(), "OpenBLAS core " + core + " (OpenBLAS's choice for this CPU)");
  if (before != nullptr) setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
}

}  // namespace
}  // namespace gatescope
