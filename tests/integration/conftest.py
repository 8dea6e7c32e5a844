"""Fixtures for the end-to-end tests (helpers live in server_harness.py)."""
import pytest

from gatescope import blas_core, paths

# OpenBLAS's kernels as gatescope-server chooses them, before any test module imports torch:
# the in-process results compared with the server's then come from the same kernels.
blas_core.use_server_blas_core()
from server_harness import REPO, start_server, stop_server  # noqa: E402

if paths.CHECKOUT != REPO:
    # The package is installed in editable mode from one checkout at a time.
    pytest.exit(f"gatescope is imported from {paths.PACKAGE_DIR}, not from this checkout "
                f"({REPO}): run scripts/install_python.sh", returncode=4)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    srv = start_server(tmp, REPO / "model_repository")
    yield srv
    assert stop_server(srv) == 0, srv.log()
