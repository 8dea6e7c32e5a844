// OpenBLAS's kernels for this CPU. Debian's LibTorch runs its matrix products on OpenBLAS,
// which picks its kernels from the CPU's model number when the library loads. A CPU newer
// than the library (Debian 12 ships OpenBLAS 0.3.21; e.g. Intel family 6 model 207) gets its
// generic SSE3 "Prescott" kernels although it runs AVX-512: the shipped models' forwards
// were 1.3-1.6x slower at batch 1 and 1.9-2.6x batched (docs/performance.md, "OpenBLAS on a
// CPU it does not know"). OpenBLAS's documented override is the OPENBLAS_CORETYPE
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
// OpenBLAS's own choice, for the log) and re-executes /proc/self/exe with `argv` (same pid,
// flags, affinity and descriptors). Returns when nothing is to be done, or when the re-exec
// failed (said on stderr; the server then runs with OpenBLAS's choice). A user who sets
// OPENBLAS_CORETYPE, to anything, keeps it.
void ReexecWithBetterOpenBlasCore(char** argv);

// One line for the start-up log: the core OpenBLAS uses and who chose it, e.g. "OpenBLAS
// core Cooperlake (set by gatescope: OpenBLAS took this CPU for Prescott)"; "not OpenBLAS"
// when another BLAS is loaded.
std::string DescribeBlasCore();

}  // namespace gatescope
