// OpenBLAS's kernels for this CPU. Debian's LibTorch runs its matrix products on OpenBLAS,
// which picks its kernels from the CPU's model number when the library loads. A CPU newer
// than the library (Debian 12 ships OpenBLAS 0.3.21; e.g. Intel family 6 model 207) gets its
// generic SSE3 "Prescott" kernels although it runs AVX-512: the shipped models' forwards
// were 1.3-1.8x slower at batch 1 and 1.5-2.7x at their largest batch (docs/performance.md,
// "OpenBLAS on a CPU it does not know"). OpenBLAS's documented override is the OPENBLAS_CORETYPE
// environment variable, read only when the library loads, so the server sets it and
// re-executes itself before anything else runs.
#pragma once

#include <string>
#include <string_view>

namespace gatescope {

// The OpenBLAS core type (OPENBLAS_CORETYPE's spelling) to force on a CPU whose
// /proc/cpuinfo "flags" line is `cpu_flags` when OpenBLAS chose `detected`; empty when its
// own choice stands. Forces only over a core without AVX2 kernels (Prescott, Core2,
// Nehalem, Sandybridge, ...) on a CPU with AVX2 and FMA: Cooperlake with AVX-512 (F, CD,
// BW, DQ, VL) and BF16, SkylakeX with that AVX-512, else Haswell. Thread-safe, pure.
std::string BetterOpenBlasCore(std::string_view detected, std::string_view cpu_flags);

// The core whose kernels OpenBLAS uses in this process, as openblas_get_corename() names it;
// empty when the BLAS library loaded is not OpenBLAS.
std::string OpenBlasCoreName();

// Call first in main(), before any thread of ours starts: when OPENBLAS_CORETYPE is unset and
// BetterOpenBlasCore names a core for this CPU, sets it (and GATESCOPE_OPENBLAS_DETECTED to
// OpenBLAS's own choice, which the re-executed process takes back out of its environment
// for the log) and re-executes /proc/self/exe with `argv` (same pid, flags, affinity and
// descriptors). Returns when nothing is to be done, when /proc/self/exe is a wrapper's
// (the dynamic loader run by hand, valgrind), or when the re-exec failed: the last two are
// said on stderr, and the server runs with OpenBLAS's choice. A user who sets
// OPENBLAS_CORETYPE, to anything (e.g. the core OpenBLAS detects, to keep it), keeps it.
void ReexecWithBetterOpenBlasCore(char** argv);

// One line for the start-up log: the core OpenBLAS uses and who chose it, e.g. "OpenBLAS
// core Cooperlake (set by gatescope: OpenBLAS took this CPU for Prescott)", and whether a
// forced core did not take (an OpenBLAS built for one CPU type ignores the variable); "not
// OpenBLAS" when another BLAS is loaded. Call after ReexecWithBetterOpenBlasCore.
std::string DescribeBlasCore();

}  // namespace gatescope
