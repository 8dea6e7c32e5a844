"""scripts/gatescope_tune.py: the batching choice on synthetic measurements; one real run on a
copy of dgvit_fmnist whose written config.pbtxt the real server loads and reports over KServe
ModelConfig; a text model timed at the asked number of pieces, and a piece count outside the
model's max_tokens refused; a bound no batch size meets."""
import importlib
import importlib.util
import json
import re
import shutil
import subprocess

import grpc
import pytest
from google.protobuf import text_format

from server_harness import REPO, import_api_modules, start_server, stop_server
from gatescope.export.archive import read_metadata

TOOL = REPO / "scripts" / "gatescope_tune.py"
_spec = importlib.util.spec_from_file_location("gatescope_tune", TOOL)
tune = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tune)


def rows(*measured):
    """(batch, images/s, p50 ms, p99 ms) tuples -> the summaries the tool measures."""
    return [{"batch": b, "images_per_s": t, "p50_ms": p50, "p99_ms": p99}
            for b, t, p50, p99 in measured]


def run_tool(*args):
    return subprocess.run(["/usr/bin/python3", str(TOOL), *args], capture_output=True,
                          text=True, timeout=120)


def copy_model(tmp_path, name="dgvit_fmnist"):
    repo = tmp_path / "repo"
    # A copy, not a link, and without the shipped config.pbtxt: each test says what is there.
    shutil.copytree(REPO / "model_repository" / name, repo / name,
                    ignore=shutil.ignore_patterns("config.pbtxt"))
    return repo


# ---- the choice ----

def test_knee_is_the_smallest_batch_within_5_percent_of_the_best():
    measured = rows((1, 1000, 1.0, 1.2), (2, 1800, 1.1, 1.4), (4, 3000, 1.3, 1.6),
                    (8, 3100, 2.6, 3.0), (16, 3120, 5.1, 6.0))
    choice = tune.choose("m", measured, 100)
    assert choice["candidates"] == [1, 2, 4, 8, 16]
    assert choice["max_batch_size"] == 4 and choice["preferred_batch_size"] == [4]


def test_bound_excludes_big_batches():
    # 2 x p99 must fit: batch 16 (2 x 12 ms) and 32 do not, though they are the fastest.
    measured = rows((1, 1000, 1, 1.5), (4, 2000, 2, 3), (8, 2500, 3.5, 4.5),
                    (16, 4000, 10, 12), (32, 5000, 20, 25))
    choice = tune.choose("m", measured, 20)
    assert choice["candidates"] == [1, 4, 8] and choice["max_batch_size"] == 8


def test_queue_delay_is_half_a_lone_forward_within_what_the_bound_leaves():
    # Half the median forward, to the nearest 100 us: 3.0 ms -> 1500 us; 0.66 ms -> 300 us.
    assert tune.choose("m", rows((4, 1000, 3.0, 4.0)), 100)["max_queue_delay_microseconds"] \
        == 1500
    assert tune.choose("m", rows((1, 1000, 0.66, 0.9)), 100)["max_queue_delay_microseconds"] \
        == 300
    # Half of a lone request's forward (the smallest batch measured), not the chosen batch's.
    assert tune.choose("m", rows((1, 1000, 0.6, 0.7), (8, 4000, 3.0, 4.0)), 100) == {
        "max_batch_size": 8, "preferred_batch_size": [8], "max_queue_delay_microseconds": 300,
        "candidates": [1, 8]}
    # The bound leaves 10 - 2 x 4.6 = 0.8 ms: 800 us, not 1500 (rounded down, never over).
    assert tune.choose("m", rows((4, 1000, 3.0, 4.6)), 10)["max_queue_delay_microseconds"] \
        == 800
    assert tune.choose("m", rows((4, 1000, 3.0, 4.96)), 10)["max_queue_delay_microseconds"] \
        == 0


def test_batch_1_missing_the_bound_is_an_error_naming_the_model():
    with pytest.raises(tune.BoundMissed, match=r"dgvit: batch 1 .* p99 forward is 6\.000 ms"):
        tune.choose("dgvit", rows((1, 100, 5, 6), (4, 200, 15, 16)), 10)


def test_default_batches_and_percentile():
    assert tune.default_batches(64) == [1, 2, 4, 8, 16, 32, 64]
    assert tune.default_batches(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    assert tune.default_batches(1) == [1]
    values = list(range(1, 101))
    assert tune.percentile(values, 0.5) == 50 and tune.percentile(values, 0.99) == 99
    assert tune.percentile([3.0, 1.0, 2.0], 0.99) == 3.0  # few samples: the worst one


# ---- real runs ----
# They check what the tool measures and writes, not how fast the machine is: their bound is
# one that a stall of a loaded machine cannot make batch 1 miss. The default 100 ms did once,
# with two test processes on two cores: a text model's batch-1 p99 came out at 52 ms, and
# the rule wants twice the p99 within the bound.
LOOSE_BOUND = ("--p99-ms", "5000")


def test_written_config_keeps_other_fields_and_the_server_serves_it(tmp_path):
    repo = copy_model(tmp_path)
    path = repo / "dgvit_fmnist" / "config.pbtxt"
    path.write_text("instance_group [ { kind: KIND_CPU count: 2 } ]\n")
    out = run_tool("--repository", str(repo), "--batches", "1,4", "--seconds", "0.2",
                   *LOOSE_BOUND, "--write", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["model"] == "dgvit_fmnist" and report["error"] is None
    assert [m["batch"] for m in report["measurements"]] == [1, 4]
    assert all(len(report["forward_ms"][b]) >= tune.MIN_CALLS for b in ("1", "4"))

    text = path.read_text()
    header = text.splitlines()[:4]
    assert header[0].startswith("# Written by scripts/gatescope_tune.py on ")
    assert header[1].startswith("# Machine: ") and "Torch thread" in header[1]
    assert header[2].startswith("# Bound: p99 5000 ms")
    assert "images/s" in text and "p99 ms" in text

    (tmp_path / "stubs").mkdir()
    kv, kv_grpc, _, _ = import_api_modules(tmp_path / "stubs")
    serving_config = importlib.import_module("gatescope.v1.model_config_pb2").ServingConfig
    cpu = importlib.import_module("inference.model_config_pb2").ModelInstanceGroup.KIND_CPU
    written = text_format.Parse(text, serving_config())
    assert written.max_batch_size in (1, 4)
    assert written.max_batch_size == report["choice"]["max_batch_size"]
    assert list(written.dynamic_batching.preferred_batch_size) == [written.max_batch_size]
    assert written.dynamic_batching.max_queue_delay_microseconds == \
        report["choice"]["max_queue_delay_microseconds"]
    assert [(g.kind, g.count) for g in written.instance_group] == [(cpu, 2)]

    (tmp_path / "server").mkdir()
    server = start_server(tmp_path / "server", repo)
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = kv_grpc.GRPCInferenceServiceStub(channel)
            cfg = stub.ModelConfig(kv.ModelConfigRequest(name="dgvit_fmnist"), timeout=30).config
    finally:
        assert stop_server(server) == 0, server.log()
    assert cfg.max_batch_size == written.max_batch_size
    assert list(cfg.dynamic_batching.preferred_batch_size) == \
        list(written.dynamic_batching.preferred_batch_size)
    assert cfg.dynamic_batching.max_queue_delay_microseconds == \
        written.dynamic_batching.max_queue_delay_microseconds
    assert [(g.kind, g.count) for g in cfg.instance_group] == [(cpu, 2)]


def test_a_text_model_is_timed_at_the_asked_piece_count(tmp_path):
    repo = copy_model(tmp_path, "dgt_wordnet")
    common = ("--repository", str(repo), "--batches", "1,2", "--seconds", "0.1", *LOOSE_BOUND)
    out = run_tool(*common, "--text-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["text_tokens"] == 8 and report["error"] is None
    assert [m["batch"] for m in report["measurements"]] == [1, 2]
    out = run_tool(*common, "--write")  # by default at max_tokens, the longest call
    assert out.returncode == 0, out.stderr
    written = (repo / "dgt_wordnet" / "config.pbtxt").read_text()
    assert "(texts of 64 pieces)" in written and "texts/s" in written
    out = run_tool(*common, "--text-tokens", "65")
    assert out.returncode != 0 and "outside [1, max_tokens 64]" in out.stderr


def test_bound_no_batch_meets_exits_1_and_writes_nothing(tmp_path):
    repo = copy_model(tmp_path)
    out = run_tool("--repository", str(repo), "--batches", "1", "--seconds", "0.1",
                   "--p99-ms", "0.001", "--write")
    assert out.returncode == 1
    assert "dgvit_fmnist: batch 1 already misses the p99 bound of 0.001 ms" in out.stderr
    assert "p99 forward is" in out.stderr
    assert "candidate" in out.stdout and " no" in out.stdout  # the table is still printed
    assert not (repo / "dgvit_fmnist" / "config.pbtxt").exists()


def test_every_shipped_model_carries_a_tuned_config(tmp_path):
    """Each shipped model's config.pbtxt was written by the tool (its header names it and the
    measured table), batches no more than the model allows and prefers its own max."""
    config_class = tune.serving_config_class(tmp_path)
    for model_dir in sorted(d for d in (REPO / "model_repository").iterdir() if d.is_dir()):
        text = (model_dir / "config.pbtxt").read_text()
        if read_metadata(model_dir / "1" / "model.pt")["task"] == "text_classification":
            assert re.search(r"^# Measured \S+ version \d+ \(texts of \d+ pieces\)", text, re.M)
        assert text.startswith("# Written by scripts/gatescope_tune.py"), model_dir.name
        assert "<- chosen" in text and "# Bound: p99" in text, model_dir.name
        config = text_format.Parse(text, config_class())
        meta = read_metadata(model_dir / "1" / "model.pt")
        assert 1 <= config.max_batch_size <= meta["max_batch_size"], model_dir.name
        assert list(config.dynamic_batching.preferred_batch_size) == [config.max_batch_size]
        assert 0 <= config.dynamic_batching.max_queue_delay_microseconds <= 100_000
        assert not config.instance_group, "instances stay with --instances / the deployment"
        # The knobs are what the rule chooses from the table the header records.
        bound = float(re.search(r"^# Bound: p99 ([\d.]+) ms", text, re.M).group(1))
        table = [tuple(float(v) for v in m.groups()) for m in re.finditer(
            r"^#\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(?:yes|no)", text, re.M)]
        assert len(table) >= 2, model_dir.name
        choice = tune.choose(model_dir.name, rows(*[(int(b), t, p50, p99)
                                                    for b, t, p50, p99 in table]), bound)
        assert choice["max_batch_size"] == config.max_batch_size, model_dir.name
        assert choice["max_queue_delay_microseconds"] == \
            config.dynamic_batching.max_queue_delay_microseconds, model_dir.name
