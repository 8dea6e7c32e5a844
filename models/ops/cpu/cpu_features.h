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

// Runs Kernel::Run(args...) built for AVX2+FMA when UseAvx2(), for the baseline ISA
// otherwise. Kernel::Run must be forced inline (GS_KERNEL_INLINE) so that each of the two
// callers below gets its own copy of the kernel compiled for its instruction set.
template <typename Kernel>
struct IsaDispatch {
  template <typename... Args>
  static void Run(const Args&... args) {
#if GS_HAVE_AVX2_PATH
    if (UseAvx2()) return Avx2(args...);
#endif
    Baseline(args...);
  }

 private:
  template <typename... Args>
  static void Baseline(const Args&... args) {
    Kernel::Run(args...);
  }
#if GS_HAVE_AVX2_PATH
  template <typename... Args>
  GS_TARGET_AVX2 static void Avx2(const Args&... args) {
    Kernel::Run(args...);
  }
#endif
};

}  // namespace gatescope::ops
