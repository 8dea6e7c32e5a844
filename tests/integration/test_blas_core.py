"""OpenBLAS's kernels: gatescope-server forces a better core than OpenBLAS's own generic
choice on a CPU the library does not know (server/app/blas_core.h), a user's
OPENBLAS_CORETYPE stands, and the Python side (gatescope.blas_core, which the tuner, the
benchmarks and these tests load OpenBLAS by) chooses exactly as the server does."""
import os
import pathlib
import re

import pytest

from gatescope import blas_core
from server_harness import BUILD, REPO, start_server, stop_server

AVX512_BF16 = "fpu sse2 fma avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16"


AVX512 = AVX512_BF16.replace(" avx512_bf16", "")
AVX2 = "fpu sse2 fma avx avx2"


@pytest.mark.parametrize("detected,flags,want", [
    ("Prescott", AVX512_BF16, "Cooperlake"),
    ("Prescott", AVX512, "SkylakeX"),
    ("Prescott", AVX2, "Haswell"),
    ("CORE2", " \t" + AVX2, "Haswell"),          # any case; /proc/cpuinfo's leading blank
    ("Nehalem", AVX512, "SkylakeX"),
    ("Sandybridge", AVX512_BF16, "Cooperlake"),
    ("Unknown", AVX2, "Haswell"),
    ("Prescott", "sse2 avx", None),               # no AVX2: OpenBLAS's choice stands
    ("Sandybridge", "sse2 avx", None),
    ("Prescott", "avx2 avx512f avx512dq avx512cd avx512bw avx512vl", None),  # no FMA
    ("Prescott", "", None),
    ("Prescott", "xavx2 fma", None),              # flags are whole words
    ("Haswell", AVX512_BF16, None),               # an AVX2 core OpenBLAS chose itself
    ("Zen", AVX512_BF16, None),
    ("SkylakeX", AVX512_BF16, None),
    ("Cooperlake", AVX512_BF16, None),
    ("Excavator", AVX512_BF16, None),
    ("SapphireRapids", AVX512_BF16, None),
    ("a core a newer OpenBLAS names", AVX512_BF16, None),
    ("Prescott", "fma avx2 avx512f avx512dq avx512cd avx512bw", "Haswell"),  # no VL
])
def test_the_rule_is_the_server_s(detected, flags, want):
    # The cases of tests/unit/app/blas_core_test.cc.
    assert blas_core.better_core(detected, flags) == want


def test_the_python_list_of_cores_is_the_server_s():
    source = (REPO / "server" / "app" / "blas_core.cc").read_text()
    listed = source[source.index("kCores = new"):].split("};", 1)[0]
    assert set(re.findall(r'"([^"]+)"', listed)) == blas_core.WITHOUT_AVX2_KERNELS


def server_blas_line(tmp_path, monkeypatch, coretype, wrap=()):
    """(The server's start-up log line about its BLAS, its environment, its whole log),
    started (behind `wrap`) with OPENBLAS_CORETYPE unset (coretype None) or set to
    `coretype`, on an empty repository."""
    if coretype is None:
        monkeypatch.delenv(blas_core.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(blas_core.VARIABLE, coretype)
    repo = tmp_path / "repo"
    repo.mkdir()
    server = start_server(tmp_path, repo, wrap=wrap)
    environ = pathlib.Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
    assert stop_server(server) == 0, server.log()  # the process started answers SIGINT
    lines = [line for line in server.log().splitlines() if "] BLAS: " in line]
    assert len(lines) == 1, server.log()
    return lines[0].split("] BLAS: ", 1)[1], environ, server.log()


# How the server is started: by its path (as the harness does), or by its bare name found on
# PATH, as the Docker image starts it (argv[0] then names no file; sh drops the harness's
# path and execs, so the pid stays the one the harness signals).
BY_PATH = ()
BY_NAME_ON_PATH = ("sh", "-c", 'shift; exec gatescope-server "$@"', "sh")


@pytest.mark.parametrize("wrap", [BY_PATH, BY_NAME_ON_PATH], ids=["by-path", "by-name-on-path"])
def test_the_server_forces_the_core_python_chooses_when_openblas_falls_back(
        tmp_path, monkeypatch, wrap):
    detected = blas_core.detected_core()
    assert detected, "scripts/setup.sh installs OpenBLAS as the BLAS Debian's LibTorch links"
    better = blas_core.better_core(detected, blas_core.cpu_flags())
    monkeypatch.setenv("PATH", f"{BUILD / 'server'}:{os.environ['PATH']}")
    line, environ, log = server_blas_line(tmp_path, monkeypatch, None, wrap=list(wrap))
    assert "wrapper" not in log, log
    if better:
        # This machine's OpenBLAS took the CPU for an older one: the server re-executed
        # itself (same pid, which the harness signalled) with the better core.
        assert line == (f"OpenBLAS core {better} (set by gatescope: OpenBLAS took this CPU "
                        f"for {detected})")
        assert f"{blas_core.VARIABLE}={better}".encode() in environ
    else:
        assert line == f"OpenBLAS core {detected} (OpenBLAS's choice for this CPU)"
        assert not any(v.startswith(blas_core.VARIABLE.encode()) for v in environ)


def test_a_user_s_openblas_coretype_stands(tmp_path, monkeypatch):
    # Prescott: kernels every x86-64 CPU runs, and never the server's own choice.
    line, _, _ = server_blas_line(tmp_path, monkeypatch, "Prescott")
    assert line == f"OpenBLAS core Prescott ({blas_core.VARIABLE}=Prescott)"


def test_under_a_wrapper_the_server_says_what_to_set_instead_of_re_executing(
        tmp_path, monkeypatch):
    # Run by the dynamic loader, /proc/self/exe is the loader: re-executing it would not
    # start the server.
    detected = blas_core.detected_core()
    better = blas_core.better_core(detected, blas_core.cpu_flags())
    line, environ, log = server_blas_line(tmp_path, monkeypatch, None,
                                          wrap=["/lib64/ld-linux-x86-64.so.2"])
    assert line == f"OpenBLAS core {detected} (OpenBLAS's choice for this CPU)"
    assert not any(v.startswith(blas_core.VARIABLE.encode()) for v in environ)
    hint = (f"OpenBLAS took this CPU for {detected}; run under a wrapper, the server cannot "
            f"re-execute itself with {blas_core.VARIABLE}={better}: set it in the environment")
    assert (hint in log) == bool(better), log


def test_this_test_process_loaded_openblas_as_the_server_would():
    # conftest.py sets OPENBLAS_CORETYPE before torch loads OpenBLAS; a server started from
    # this environment keeps a set variable, else applies the rule.
    import ctypes
    import torch  # noqa: F401  (loads OpenBLAS, if nothing has yet)
    lib = ctypes.CDLL("libblas.so.3")
    lib.openblas_get_corename.restype = ctypes.c_char_p
    used = lib.openblas_get_corename().decode().strip()
    detected = blas_core.detected_core()
    server_would = (os.environ.get(blas_core.VARIABLE)
                    or blas_core.better_core(detected, blas_core.cpu_flags()) or detected)
    assert used.lower() == server_would.lower()


def test_openblas_loaded_reads_this_process_s_mappings():
    # A fresh interpreter maps OpenBLAS only once torch loads it; use_server_blas_core()
    # relies on this to refuse a call that comes too late.
    import subprocess
    import sys
    script = ("from gatescope import blas_core\n"
              "before = blas_core.openblas_loaded()\n"
              "import torch\n"
              "print(before, blas_core.openblas_loaded())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["False", "True"]
