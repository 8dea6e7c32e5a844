"""The server's thread scheduling (server/common/thread_scheduling.h) is in effect: forward
passes run on threads named gs-forward under the policy the process started with, every
gRPC thread under SCHED_BATCH; --request_threads_batch_scheduling=false leaves every thread
as it was, and a policy chosen by the operator (chrt) is kept. Read from /proc, the kernel's
own account; the numbers are Linux's policy constants."""
import pathlib
import shutil

import pytest

from gatescope.data.fashion_mnist import write_pngs
from server_harness import REPO, start_server, stop_server

SCHED_OTHER, SCHED_BATCH, SCHED_IDLE = 0, 3, 5
MODELS = ("dgvit_fmnist", "vit_fmnist")
# Names gRPC gives its threads (truncated to 15 characters by the kernel).
GRPC_THREADS = ("default-executo", "grpc_global_tim", "event_engine", "nexting_thread",
                "timer_manager", "resolver-execut", "grpcpp_sync_ser")


@pytest.fixture(scope="module")
def pngs(tmp_path_factory):
    return write_pngs(tmp_path_factory.mktemp("png"), start=0, count=3)


def threads(server):
    """(tid, name, policy) of every thread of the server process."""
    out = []
    for task in sorted(pathlib.Path(f"/proc/{server.proc.pid}/task").iterdir()):
        name = (task / "comm").read_text().strip()
        # Field 41 of stat is the policy; the name (field 2) may hold spaces, so split after it.
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        out.append((int(task.name), name, int(fields[41 - 3])))
    return out


def serve(tmp_path, flags=(), wrap=()):
    repo = tmp_path / "repo"
    for name in MODELS:
        shutil.copytree(REPO / "model_repository" / name, repo / name)
    return start_server(tmp_path, repo, list(flags), wrap=wrap)


def predict_each(server, pngs):
    for model in MODELS:
        res = server.client("predict", "--model", model, *[str(p) for p, _ in pngs])
        assert res.returncode == 0, res.stderr
        assert len([l for l in res.stdout.splitlines() if l.strip()]) >= len(pngs), res.stdout


def policies(server, names):
    return {policy for _, name, policy in threads(server) if name in names}


def test_forwards_keep_the_process_policy_and_grpc_threads_run_batch(tmp_path, pngs):
    srv = serve(tmp_path)
    try:
        predict_each(srv, pngs)  # forwards ran, and may have started Torch's own threads
        table = threads(srv)
        forward = [t for t in table if t[1] == "gs-forward"]
        # One worker per model instance, and the threads Torch starts from them for the
        # same forwards (a thread inherits its creator's name and policy).
        assert len(forward) >= len(MODELS), table
        assert {p for *_, p in forward} == {SCHED_OTHER}, table
        grpc_threads = [t for t in table if t[1] in GRPC_THREADS]
        assert len(grpc_threads) >= 3, table
        assert {p for *_, p in grpc_threads} == {SCHED_BATCH}, table
        main = next(t for t in table if t[0] == srv.proc.pid)
        assert main[2] == SCHED_BATCH, table
        assert "thread scheduling: request threads SCHED_BATCH, forward threads SCHED_OTHER" \
            in srv.log()
    finally:
        assert stop_server(srv) == 0, srv.log()


def test_the_flag_off_leaves_every_thread_as_it_was(tmp_path, pngs):
    srv = serve(tmp_path, ["--request_threads_batch_scheduling=false"])
    try:
        predict_each(srv, pngs)
        assert {p for *_, p in threads(srv)} == {SCHED_OTHER}, threads(srv)
        assert "gs-forward" in {name for _, name, _ in threads(srv)}
        assert "thread scheduling: unchanged (--request_threads_batch_scheduling=false)" \
            in srv.log()
    finally:
        assert stop_server(srv) == 0, srv.log()


@pytest.mark.skipif(shutil.which("chrt") is None, reason="needs util-linux chrt")
def test_a_policy_the_operator_chose_is_kept(tmp_path, pngs):
    srv = serve(tmp_path, wrap=["chrt", "--idle", "0"])
    try:
        predict_each(srv, pngs)
        assert {p for *_, p in threads(srv)} == {SCHED_IDLE}, threads(srv)
        assert "thread scheduling: unchanged (the process runs under scheduling policy 5" \
            in srv.log()
    finally:
        assert stop_server(srv) == 0, srv.log()
