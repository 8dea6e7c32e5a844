"""Fixtures for the end-to-end tests (helpers live in server_harness.py)."""
import pytest

from gatescope import paths
from server_harness import REPO, start_server, stop_server

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
