"""Runs op-test code in a fresh process with the AVX2 kernels disabled
(GATESCOPE_DISABLE_AVX2=1 is read once, when the op library loads), so the baseline-ISA
build of a CPU kernel is what runs."""
import os
import pathlib
import subprocess
import sys

_TESTS = pathlib.Path(__file__).resolve().parent


def printed_without_avx2(body: str) -> str:
    """Runs `body` with models/ and models/tests/ importable and the op library loaded
    (`torch` imported); returns what it printed. Raises if it fails."""
    script = ("import sys, torch; sys.path[:0] = sys.argv[1:3]\n"
              "from gatescope import ops; ops.load()\n" + body)
    env = dict(os.environ, GATESCOPE_DISABLE_AVX2="1")
    return subprocess.run([sys.executable, "-c", script, str(_TESTS.parent), str(_TESTS)],
                          env=env, capture_output=True, text=True, check=True).stdout
