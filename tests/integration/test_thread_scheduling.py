"""The server's thread scheduling (server/common/thread_scheduling.h) is in effect: forward
passes (the batchers' workers, named gs-forward) run under the policy the process started
with, every other thread (gRPC's, main) under SCHED_BATCH, also after load; --request_threads_batch_scheduling
=false leaves every thread as it was, and a policy the operator chose (chrt) is kept. With
--forward_cpus the forward passes run on those CPUs and every other thread on the rest.
Read from /proc, the kernel's own account; the numbers are Linux's policy constants."""
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from gatescope.data.fashion_mnist import write_pngs
from server_harness import BUILD, REPO, start_server, stop_server

SCHED_OTHER, SCHED_BATCH = 0, 3
MODELS = ("dgvit_fmnist", "vit_fmnist")
# Names gRPC 1.51 gives its threads (cut to 15 characters by the kernel).
GRPC_THREADS = ("default-executo", "grpc_global_tim", "event_engine", "nexting_thread",
                "timer_manager", "resolver-execut", "grpcpp_sync_ser")

pytestmark = pytest.mark.skipif(os.sched_getscheduler(0) != os.SCHED_OTHER,
                                reason="the server would inherit the runner's own policy")


@pytest.fixture(scope="module")
def pngs(tmp_path_factory):
    return [str(p) for p, _ in write_pngs(tmp_path_factory.mktemp("png"), start=0, count=8)]


def threads(server):
    """(tid, name, policy) of every thread of the server process."""
    out = []
    for task in sorted(pathlib.Path(f"/proc/{server.proc.pid}/task").iterdir()):
        try:
            name = (task / "comm").read_text().strip()
            stat = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        # Field 41 is the policy; the name (field 2) may hold spaces, so split after it.
        out.append((int(task.name), name, int(stat.rsplit(")", 1)[1].split()[41 - 3])))
    return out


def serve(tmp_path, flags=(), wrap=()):
    repo = tmp_path / "repo"
    for name in MODELS:
        shutil.copytree(REPO / "model_repository" / name, repo / name)
    return start_server(tmp_path, repo, list(flags), wrap=wrap)


def predict_each(server, pngs):
    """The predict CLI's output lines, per model."""
    out = {}
    for model in MODELS:
        res = server.client("predict", "--model", model, *pngs)
        assert res.returncode == 0, res.stderr
        out[model] = [l for l in res.stdout.splitlines() if l.strip()]
        assert len(out[model]) == len(pngs), res.stdout
    return out


# The kernel's CPU list format ("0-3,8") as a set: the tuner's parser (a script, not a package).
_spec = importlib.util.spec_from_file_location("gatescope_tune",
                                               REPO / "scripts" / "gatescope_tune.py")
_tune = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tune)
parse_cpu_list = _tune.parse_cpu_list


def forward_cpu_ticks(server):
    """CPU time (clock ticks, user + system) the server's gs-forward threads have used."""
    total = 0
    for tid, name, _ in threads(server):
        if name != "gs-forward":
            continue
        try:
            stat = pathlib.Path(f"/proc/{server.proc.pid}/task/{tid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat.rsplit(")", 1)[1].split()  # from field 3 on
        total += int(fields[14 - 3]) + int(fields[15 - 3])
    return total


def cpus_allowed(server):
    """(tid, name, CPUs the thread may run on) of every thread of the server process."""
    out = []
    for tid, name, _ in threads(server):
        try:
            status = pathlib.Path(f"/proc/{server.proc.pid}/task/{tid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        line = next(l for l in status.splitlines() if l.startswith("Cpus_allowed_list:"))
        out.append((tid, name, frozenset(parse_cpu_list(line.split(":", 1)[1].strip()))))
    return out


def policies_seen_under_load(server, pngs, tids, seconds):
    """Policies of the threads `tids` sampled for `seconds` while gatescope-perf keeps a
    model busy."""
    load = subprocess.Popen([str(BUILD / "client" / "gatescope-perf"), "--server",
                             server.address, "--model", MODELS[0], "--concurrency", "4",
                             "--warmup-ms", "0", "--window-ms", "1000", "--max-windows", "30",
                             *pngs], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = set()
    try:
        deadline = time.time() + seconds
        while time.time() < deadline:
            seen |= {p for tid, _, p in threads(server) if tid in tids}
            time.sleep(0.001)
    finally:
        load.kill()
        load.wait()
    return seen


def test_forward_threads_run_sched_other_and_every_other_thread_batch(tmp_path, pngs):
    srv = serve(tmp_path)
    try:
        # Before any forward the only gs-forward threads are the batchers' workers.
        workers = {tid for tid, name, _ in threads(srv) if name == "gs-forward"}
        assert len(workers) == len(MODELS), threads(srv)  # one instance each
        predict_each(srv, pngs)
        assert SCHED_BATCH not in policies_seen_under_load(srv, pngs, workers, seconds=2)
        table = threads(srv)
        # Every gs-forward thread (the workers, and threads Torch started from them, which
        # inherit the name) runs SCHED_OTHER ...
        assert {p for _, name, p in table if name == "gs-forward"} == {SCHED_OTHER}, table
        # ... every gRPC thread, including those gRPC started under load, SCHED_BATCH.
        grpc_threads = [t for t in table if t[1] in GRPC_THREADS]
        assert len(grpc_threads) >= 3, table
        assert {p for *_, p in grpc_threads} == {SCHED_BATCH}, table
        assert next(t for t in table if t[0] == srv.proc.pid)[2] == SCHED_BATCH, table
        assert "thread scheduling: request threads SCHED_BATCH, forward passes SCHED_OTHER" \
            in srv.log()
    finally:
        assert stop_server(srv) == 0, srv.log()


def chrt_batch_works():
    return shutil.which("chrt") is not None and subprocess.run(
        ["chrt", "--batch", "0", "true"], capture_output=True).returncode == 0


@pytest.mark.parametrize("flags, wrap, policy, log", [
    (["--request_threads_batch_scheduling=false"], [], SCHED_OTHER,
     "thread scheduling: unchanged (--request_threads_batch_scheduling=false)"),
    pytest.param([], ["chrt", "--batch", "0"], SCHED_BATCH,
                 "thread scheduling: unchanged (the process runs under scheduling policy 3",
                 marks=pytest.mark.skipif(not chrt_batch_works(),
                                          reason="needs util-linux chrt and sched_setscheduler")),
], ids=["flag off", "policy chosen with chrt"])
def test_otherwise_every_thread_keeps_the_policy_it_started_with(tmp_path, pngs, flags, wrap,
                                                                  policy, log):
    srv = serve(tmp_path, flags, wrap)
    try:
        predict_each(srv, pngs)
        tids = {tid for tid, _, _ in threads(srv)}
        assert policies_seen_under_load(srv, pngs, tids, seconds=2) == {policy}
        assert {p for *_, p in threads(srv)} == {policy}, threads(srv)
        assert log in srv.log()
    finally:
        assert stop_server(srv) == 0, srv.log()


def test_forward_cpus_put_forwards_on_their_cpus_and_every_other_thread_on_the_rest(tmp_path,
                                                                                   pngs):
    mine = sorted(os.sched_getaffinity(0))
    forward = frozenset(mine[:1])
    rest = frozenset(mine[1:]) or frozenset(mine)  # one CPU: nothing apart, shared
    reference = serve(tmp_path / "reference")
    try:
        expected = predict_each(reference, pngs)
    finally:
        assert stop_server(reference) == 0, reference.log()
    srv = serve(tmp_path / "placed", [f"--forward_cpus={mine[0]}", "--torch_threads=0"])
    try:
        # Before any forward the only gs-forward threads are the batchers' workers.
        assert len([t for t in threads(srv) if t[1] == "gs-forward"]) == len(MODELS)
        # Same answers, placed or not (scores to float rounding: the Torch thread counts differ).
        got = predict_each(srv, pngs)
        for model in MODELS:
            for line, ref in zip(got[model], expected[model]):
                a, b = json.loads(line), json.loads(ref)
                assert a["label"] == b["label"] and [c["label"] for c in a["topk"]] == \
                    [c["label"] for c in b["topk"]], (line, ref)
                assert a["score"] == pytest.approx(b["score"], rel=1e-4), (line, ref)
        load = subprocess.Popen([str(BUILD / "client" / "gatescope-perf"), "--server",
                                 srv.address, "--model", MODELS[0], "--concurrency", "4",
                                 "--warmup-ms", "0", "--window-ms", "1000", "--max-windows",
                                 "30", *pngs], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.5)
            table = cpus_allowed(srv)
        finally:
            load.kill()
            load.wait()
        # Idle again, the workers poll for at most --forward_idle_poll_us after their last
        # request and then sleep: over a second they take (almost) no CPU time.
        time.sleep(0.2)
        before = forward_cpu_ticks(srv)
        time.sleep(1.0)
        assert forward_cpu_ticks(srv) - before <= 5, "an idle worker kept its CPU busy"
        # The workers, and threads Torch started from them (they inherit the name) ...
        assert {cpus for _, name, cpus in table if name == "gs-forward"} == {forward}, table
        # ... gRPC's threads (also those started under load) and main on the rest ...
        request = [t for t in table if t[1] in GRPC_THREADS or t[0] == srv.proc.pid]
        assert len(request) >= 4, table
        assert {cpus for *_, cpus in request} == {rest}, table
        # ... where the replies are finished when there are CPUs apart ...
        replies = [t for t in table if t[1] == "gs-reply"]
        assert (1 <= len(replies) <= len(rest)) if len(mine) > 1 else not replies, table
        assert {cpus for *_, cpus in replies} <= {rest}, table
        # ... and threads libraries started before main (OpenBLAS's pool, unnamed) with the
        # forwards, whose work they do.
        assert {cpus for *_, cpus in table} == {forward, rest}, table
        log = srv.log()
        assert f"cpu placement: forward passes on CPUs {mine[0]}, every other thread on CPUs" \
            in log, log
        assert ("idle workers poll 500us before they sleep" if len(mine) > 1
                else "(no CPU left apart: shared)") in log, log
        # Automatic Torch threads: the forward CPUs are the forwards' own.
        assert "torch threads per forward: 1 (automatic: 1 core(s) of --forward_cpus" in log \
            or len(mine) == 1, log
    finally:
        assert stop_server(srv) == 0, srv.log()


def test_an_idle_poll_out_of_range_stops_the_server_with_the_reason(tmp_path):
    res = subprocess.run([str(BUILD / "server" / "gatescope-server"),
                          f"--model_repository={tmp_path}", "--grpc_port=0", "--http_port=0",
                          "--metrics_port=0", "--forward_idle_poll_us=-1"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "forward_idle_poll" in res.stdout + res.stderr and "0..1s" in res.stdout + res.stderr, \
        res.stdout + res.stderr


@pytest.mark.parametrize("value, message", [
    ("4095", "Illegal value '4095' specified for flag 'forward_cpus'"),
    ("3-1", "range '3-1' runs backwards"),
    ("1023", "--forward_cpus=1023 names CPUs this process may not run on"),
])
def test_forward_cpus_that_cannot_be_used_stop_the_server_with_the_reason(tmp_path, value,
                                                                         message):
    if value == "1023" and 1023 in os.sched_getaffinity(0):
        pytest.fail("the test needs a CPU number this process may not use")
    res = subprocess.run([str(BUILD / "server" / "gatescope-server"),
                          f"--model_repository={tmp_path}", "--grpc_port=0", "--http_port=0",
                          "--metrics_port=0", f"--forward_cpus={value}"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert message in res.stdout + res.stderr, res.stdout + res.stderr
