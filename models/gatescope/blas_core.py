"""OpenBLAS's kernels for this CPU, chosen as gatescope-server chooses them.

Debian's torch runs its matrix products on OpenBLAS, which picks its kernels from the CPU's
model number when the library loads. On a CPU newer than the library (Debian 12 ships
OpenBLAS 0.3.21; e.g. Intel family 6 model 207) it takes its generic SSE3 "Prescott"
kernels although the CPU runs AVX-512, and the shipped models' forwards run 1.3-2.7x slower
(docs/performance.md, "OpenBLAS on a CPU it does not know"). The server forces
OPENBLAS_CORETYPE, OpenBLAS's documented override, by the rule of server/app/blas_core.h,
which `better_core` repeats. A Python process that compares itself with the server (the
tuner, the benchmarks, the tests) must load OpenBLAS the same way, and the variable is read
only when the library loads: call `use_server_blas_core()` before anything loads it (torch,
numpy and scipy all do), or give a child process `server_environment()`.

Run as a script it prints the core the server would force here (an empty line for none).
"""
import functools
import os
import subprocess
import sys

VARIABLE = "OPENBLAS_CORETYPE"

# OpenBLAS's x86 cores whose kernels predate AVX2, as openblas_get_corename() names them
# (compared in lower case); the same closed list as server/app/blas_core.cc.
WITHOUT_AVX2_KERNELS = frozenset({
    "unknown", "katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2",
    "penryn", "dunnington", "nehalem", "athlon", "opteron", "opteron(sse3)", "barcelona",
    "nano", "sandybridge", "bobcat", "bulldozer", "piledriver", "steamroller"})

AVX512 = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def better_core(detected, cpu_flags):
    """The core to force when OpenBLAS chose `detected` on a CPU whose /proc/cpuinfo "flags"
    line is `cpu_flags`, or None when its own choice stands: over a core without AVX2
    kernels on a CPU with AVX2 and FMA, Cooperlake (AVX-512 and BF16), SkylakeX (AVX-512) or
    Haswell."""
    if detected.lower() not in WITHOUT_AVX2_KERNELS:
        return None
    flags = set(cpu_flags.split())
    if not {"avx2", "fma"} <= flags:
        return None
    if set(AVX512) <= flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    return "Haswell"


def cpu_flags():
    """The "flags" line of /proc/cpuinfo (empty when there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return line.split(":", 1)[1]
    except OSError:
        pass
    return ""


# Loads libblas.so.3 (the BLAS Debian's torch links) and prints openblas_get_corename(), or
# nothing when that BLAS is not OpenBLAS.
_PROBE = """
import ctypes
lib = ctypes.CDLL("libblas.so.3")
name = getattr(lib, "openblas_get_corename", None)
if name is not None:
    name.restype = ctypes.c_char_p
    print(name().decode().strip())
"""


@functools.lru_cache(maxsize=None)
def detected_core():
    """The core OpenBLAS picks on this CPU by itself (probed in a child process without
    OPENBLAS_CORETYPE, so this process's own OpenBLAS is not loaded early), or None when the
    BLAS is not OpenBLAS."""
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=60)
    return out.stdout.strip() or None


def server_environment():
    """What to add to a child's environment for it to load OpenBLAS as gatescope-server
    does here: {} when OPENBLAS_CORETYPE is already set (the server keeps it too) or
    OpenBLAS's own choice stands, else {OPENBLAS_CORETYPE: the better core}."""
    if VARIABLE in os.environ:
        return {}
    detected = detected_core()
    better = better_core(detected, cpu_flags()) if detected else None
    return {VARIABLE: better} if better else {}


def openblas_loaded():
    """Whether this process has loaded OpenBLAS already (torch, numpy and scipy all link it
    through libblas.so.3), so that its kernels are chosen."""
    from gatescope.process_maps import library_mapped  # here: the module also runs as a script
    return library_mapped("openblas")


def use_server_blas_core():
    """Sets this process's OPENBLAS_CORETYPE as the server would; must run before anything
    loads OpenBLAS (torch, numpy, scipy): a RuntimeError otherwise, when the server would
    choose another core."""
    env = server_environment()
    if env and openblas_loaded():
        raise RuntimeError("use_server_blas_core() after OpenBLAS was loaded (by torch, numpy "
                           "or scipy): its kernels are already chosen")
    os.environ.update(env)


if __name__ == "__main__":
    print(server_environment().get(VARIABLE, ""))
