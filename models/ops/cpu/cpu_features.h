// Run-time choice of the CPU kernels' instruction set, shared by every CPU backend.
#pragma once

#include <cstdlib>

namespace gatescope::ops {

// Each float kernel is compiled twice, for AVX2+FMA and for the baseline ISA, and chosen
// by CPU features once. (target_clones with arch=haswell would dispatch on the CPU model,
// not on its features.)
#if defined(__x86_64__) && defined(__GNUC__)
#define GS_HAVE_AVX2_PATH 1
#define GS_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define GS_HAVE_AVX2_PATH 0
#define GS_TARGET_AVX2
#endif

// True when the AVX2+FMA build of a kernel may run. GATESCOPE_DISABLE_AVX2 (any value)
// forces the baseline path, e.g. to test it. Thread-safe.
inline bool UseAvx2() {
#if GS_HAVE_AVX2_PATH
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           std::getenv("GATESCOPE_DISABLE_AVX2") == nullptr;
  return avx2;
#else
  return false;
#endif
}

}  // namespace gatescope::ops
