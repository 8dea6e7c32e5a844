import os
import pathlib

import pytest

from gatescope import blas_core, paths

# OpenBLAS's kernels as gatescope-server chooses them, before torch loads OpenBLAS: results
# compared with the server's then come from the same kernels.
blas_core.use_server_blas_core()
import torch  # noqa: E402

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
if paths.CHECKOUT != CHECKOUT:
    # The package is installed in editable mode from one checkout at a time; testing
    # another checkout's code would pass or fail for the wrong reasons.
    pytest.exit(f"gatescope is imported from {paths.PACKAGE_DIR}, not from this checkout "
                f"({CHECKOUT}): run scripts/install_python.sh", returncode=4)
# Two Torch threads in one process; one per process when pytest-xdist runs several
# (scripts/test.sh: one per core), whose OpenMP threads would otherwise wait spinning for
# cores the other worker holds: models/tests with two workers took 145-173 s at two threads
# each and 81-97 s at one (2-vCPU VM, 2026-11-29). Tests of the threaded paths set their own.
torch.set_num_threads(1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else 2)


@pytest.fixture(scope="session", autouse=True)
def ops():
    """The built op library, loaded before the first test whether or not a test asks for
    it: scripting or loading a model that calls a fused op needs the op registered, and the
    suite runs in several processes (scripts/test.sh), so no test may rely on an earlier
    one having loaded it. The suite fails (not skips) when the library is missing."""
    from gatescope import ops as gops
    gops.load()
    return torch.ops.gatescope
