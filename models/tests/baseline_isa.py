"""Runs op-test code in a fresh process with the AVX2 kernels disabled
(GATESCOPE_DISABLE_AVX2=1 is read once, when the op library loads), so the baseline-ISA
build of a CPU kernel is what runs."""
import os
import pathlib
import subprocess
import sys

_TESTS = pathlib.Path(__file__).resolve().parent


def printed_without_avx2(body: str) -> str:
    """Runs `body` with the op library loaded (`torch` imported) and the test modules
    importable (it runs in models/tests/, the first entry of `python -c`'s path); returns
    what it printed. Raises if it fails."""
    script = "import torch\nfrom gatescope import ops; ops.load()\n" + body
    env = dict(os.environ, GATESCOPE_DISABLE_AVX2="1")
    return subprocess.run([sys.executable, "-c", script], cwd=_TESTS, env=env,
                          capture_output=True, text=True, check=True).stdout
