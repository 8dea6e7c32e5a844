"""Fixtures for the end-to-end tests (helpers live in server_harness.py)."""
import pytest

from server_harness import REPO, start_server, stop_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    srv = start_server(tmp, REPO / "model_repository")
    yield srv
    assert stop_server(srv) == 0, srv.log()
