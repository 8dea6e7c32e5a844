"""The server's allocator policy is in effect (server/allocator.cc): jemalloc is the malloc of
the running process with decay off, MALLOC_CONF still overrides it, and unused memory goes
back to the system on the --return_unused_memory_seconds period and only then. A sanitizer
build (scripts/asan_integration.sh) keeps the sanitizer's allocator and says so."""
import re
import shutil
import subprocess
import time

import grpc
import numpy as np
import pytest

from gatescope.data.png import encode_gray_png
from server_harness import BUILD, REPO, import_api_modules, start_server, stop_server

SEGMENTER = "pvt_gdla_colin27"
SANITIZED = re.search(r"^GATESCOPE_SANITIZE:STRING=\S", (BUILD / "CMakeCache.txt").read_text(),
                      re.MULTILINE) is not None


def rss_mib(server):
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def apis(tmp_path_factory):
    return import_api_modules(tmp_path_factory.mktemp("stubs"))


def serve(tmp_path, flags=(), env=None):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "model_repository" / SEGMENTER, repo / SEGMENTER)
    return start_server(tmp_path, repo, list(flags), env=env)


def allocator_line(server):
    return next(line for line in server.log().splitlines() if "allocator: " in line)


def test_jemalloc_is_the_running_server_s_malloc(tmp_path):
    srv = serve(tmp_path)
    try:
        maps = open(f"/proc/{srv.proc.pid}/maps").read()
        line = allocator_line(srv)
        if SANITIZED:
            assert "sanitizer runtime" in line and "libjemalloc" not in maps
        else:
            assert re.search(r"allocator: jemalloc 5\.\S+ \(dirty_decay_ms -1\)$", line), line
            assert "libjemalloc.so.2" in maps
    finally:
        assert stop_server(srv) == 0, srv.log()


@pytest.mark.skipif(SANITIZED, reason="a sanitizer build has no jemalloc to configure")
def test_malloc_conf_in_the_environment_overrides_the_server_s(tmp_path):
    srv = serve(tmp_path, env={"MALLOC_CONF": "dirty_decay_ms:5000"})
    try:
        assert allocator_line(srv).endswith("(dirty_decay_ms 5000)"), allocator_line(srv)
    finally:
        assert stop_server(srv) == 0, srv.log()


def segment_a_few(apis, server):
    _, _, v1, v1_grpc = apis
    rng = np.random.default_rng(0)
    with grpc.insecure_channel(server.address) as channel:
        stub = v1_grpc.InferenceStub(channel)
        for _ in range(3):
            image = encode_gray_png(rng.integers(0, 256, (448, 384), dtype=np.uint8))
            answer = stub.Predict(v1.PredictRequest(model_name=SEGMENTER, image=image), timeout=120)
            assert answer.model_name == SEGMENTER


@pytest.mark.skipif(SANITIZED, reason="the sanitizer's allocator keeps its own policy")
@pytest.mark.parametrize("period", [0, 1])
def test_unused_memory_goes_back_on_the_period_only(tmp_path, apis, period):
    """After segmenting three 448x384 slices the server holds the forward passes' freed
    memory: with a 1 s period RSS falls by over 12 MiB (24 measured) within seconds; with 0
    (never) it stays (jemalloc's own decay is off)."""
    srv = serve(tmp_path, [f"--return_unused_memory_seconds={period}"])
    try:
        segment_a_few(apis, srv)
        after = rss_mib(srv)
        time.sleep(3.5)
        later = rss_mib(srv)
        if period:
            assert after - later > 12, (after, later)
        else:
            assert abs(after - later) < 4, (after, later)
    finally:
        assert stop_server(srv) == 0, srv.log()


def test_a_negative_period_is_refused(tmp_path):
    result = subprocess.run([str(BUILD / "server" / "gatescope-server"),
                             f"--model_repository={REPO / 'model_repository'}",
                             "--return_unused_memory_seconds=-1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "return_unused_memory_seconds must be >= 0" in result.stderr
