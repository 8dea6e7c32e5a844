"""The GPU check's host-side scripts run here, on the CPU: serve_check.py's repository copies
(hard-linked versions, one instance group, the same batching on both sides), its comparison
(a planted difference is reported) and a whole run with CPU instances on both sides against
the real server, which must find every answer equal; torchscript_reference.py and
torchscript_compat.py under one torch, which must agree."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from server_harness import BUILD, REPO

TOOL = REPO / "scripts" / "gpu" / "serve_check.py"
_spec = importlib.util.spec_from_file_location("serve_check", TOOL)
serve_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_check)


def models_dir(tmp_path, *names):
    out = tmp_path / "models"
    out.mkdir()
    for name in names:
        (out / name).symlink_to(REPO / "model_repository" / name)
    return out


def test_repository_copy_has_one_instance_group_and_equal_batching(tmp_path):
    models = models_dir(tmp_path, "dgvit_fmnist", "dgt_wordnet")
    serve_check.write_repository(models, tmp_path / "gpu", "KIND_GPU", 64)
    for name in ("dgvit_fmnist", "dgt_wordnet"):
        config = (tmp_path / "gpu" / name / "config.pbtxt").read_text()
        assert config.count("instance_group") == 1 and "kind: KIND_GPU count: 1" in config
        assert "max_batch_size: 64" in config and "max_queue_delay_microseconds: 500" in config
        assert "preferred_batch_size" not in config
        version = tmp_path / "gpu" / name / "1"
        assert not version.is_symlink() and (version / "model.pt").is_file()
        assert (version / "model.pt").read_bytes()[:4] == (
            REPO / "model_repository" / name / "1" / "model.pt").read_bytes()[:4]


def test_overhead_variants_turn_batching_off_or_double_the_instances(tmp_path):
    models = models_dir(tmp_path, "dgvit_fmnist", "dgt_wordnet")
    serve_check.write_repository(models, tmp_path / "gpu", "KIND_GPU", 64, ["dgvit_fmnist"])
    made = sorted(p.name for p in (tmp_path / "gpu").iterdir())
    assert made == ["dgt_wordnet", "dgvit_fmnist", "dgvit_fmnist__unbatched", "dgvit_fmnist__x2"]
    off = (tmp_path / "gpu" / "dgvit_fmnist__unbatched" / "config.pbtxt").read_text()
    assert "dynamic_batching" not in off and off.count("max_batch_size") == 1
    assert "max_batch_size: 1\n" in off and "kind: KIND_GPU count: 1" in off
    two = (tmp_path / "gpu" / "dgvit_fmnist__x2" / "config.pbtxt").read_text()
    assert "max_batch_size: 64" in two and "kind: KIND_GPU count: 2" in two
    assert "max_queue_delay_microseconds: 500" in two


def test_breakdown_divides_stage_sums_by_their_counts():
    before = {"request_duration_seconds_sum": 1.0, "request_duration_seconds_count": 10,
              "queue_duration_seconds_sum": 0.5, "queue_duration_seconds_count": 10,
              "compute_infer_duration_seconds_sum": 2.0, "compute_infer_duration_seconds_count": 4,
              "inferences_total": 10, "executions_total": 4}
    after = {"request_duration_seconds_sum": 1.4, "request_duration_seconds_count": 110,
             "queue_duration_seconds_sum": 0.7, "queue_duration_seconds_count": 110,
             "compute_infer_duration_seconds_sum": 2.5, "compute_infer_duration_seconds_count": 29,
             "inferences_total": 110, "executions_total": 29}
    got = serve_check.breakdown(before, after)
    assert got["request"] == pytest.approx(4.0) and got["queue"] == pytest.approx(2.0)
    assert got["compute_infer"] == pytest.approx(20.0) and got["batch"] == pytest.approx(4.0)
    assert got["compute_input"] is None and got["compute_output"] is None
    assert serve_check.cpu_set("0-2,5") == {0, 1, 2, 5}


def test_compare_reports_float_error_and_unequal_items():
    cpu = {"logits": np.array([[1.0, -20.0]]), "label": np.array([3, 4])}
    gpu = {"logits": np.array([[1.0 + 1e-6, -20.0 + 4e-5]]), "label": np.array([3, 5])}
    errors = serve_check.compare(cpu, gpu)
    assert abs(errors["logits"] - 2e-6) < 1e-9  # scaled: 4e-5 / 20
    assert errors["label"] == 0.5
    assert serve_check.compare(cpu, {"label": gpu["label"]})["logits"] == float("inf")


class FakeClient:
    """Answers KServe calls with fixed outputs per example: logits and a mask; `shift` moves
    the logits, `flip` changes one mask item."""

    def __init__(self, shift=0.0, flip=False):
        self.shift, self.flip = shift, flip

    def infer(self, model, inputs):
        n = len(next(iter(inputs.values())))
        mask = np.zeros((n, 64, 64), dtype=np.uint8)  # one item: under 1e-3 of them
        if self.flip:
            mask[0, 1, 2] = 1
        return {"logits": np.ones((n, 3), dtype=np.float32) + self.shift, "mask": mask}


def test_answers_ok_needs_close_floats_and_equal_integers(tmp_path):
    (tmp_path / "fmnist").mkdir()
    for i in range(2):
        (tmp_path / "fmnist" / f"{i}.png").write_bytes(b"stand-in")
    check = lambda gpu: serve_check.check_answers("vit_fmnist", {"cpu": FakeClient(), "gpu": gpu},
                                                  tmp_path, "input")
    assert check(FakeClient(shift=1e-5))["ok"]
    loose = check(FakeClient(shift=1e-2))
    assert not loose["ok"] and loose["errors"]["logits"] > 1e-3
    flipped = check(FakeClient(flip=True))
    assert not flipped["ok"] and 0 < flipped["errors"]["mask"] < 1e-3


def test_graph_answers_are_checked_against_the_cpu_servers(tmp_path):
    (tmp_path / "fmnist").mkdir()
    for i in range(2):
        (tmp_path / "fmnist" / f"{i}.png").write_bytes(b"stand-in")
    serve_check.check_answers("vit_fmnist", {"cpu": FakeClient(), "gpu": FakeClient()},
                              tmp_path, "input")  # keeps the CPU server's answers
    assert serve_check.check_graph_answers("vit_fmnist", FakeClient(shift=1e-5), tmp_path)["ok"]
    off = serve_check.check_graph_answers("vit_fmnist", FakeClient(shift=1e-2), tmp_path)
    assert not off["ok"] and off["errors"]["logits"] > 1e-3
    assert not serve_check.check_graph_answers("vit_fmnist", FakeClient(flip=True), tmp_path)["ok"]


def test_graph_report_counts_recordings_and_keeps_why_they_stopped():
    log = ("[gatescope INFO] group0_0: recorded a CUDA graph for inputs Float[1,1,28,28] (1 so far)\n"
           "[gatescope INFO] group0_0: recorded a CUDA graph for inputs Float[4,1,28,28] (2 so far)\n"
           "[gatescope WARNING] group0_1: CUDA graphs off for this instance, its forward could "
           "not be recorded for inputs Float[2,1,28,28]: operation not permitted\n")
    got = serve_check.graph_report(log, "vit_fmnist")
    assert got["recorded"] == 2
    assert got["off"] == ["group0_1: CUDA graphs off for this instance, its forward could not "
                          "be recorded for inputs Float[2,1,28,28]: operation not permitted"]
    assert serve_check.graph_report("", "vit_fmnist") == {"recorded": 0, "off": []}


def test_graph_report_gives_each_model_the_recordings_of_its_warm_up():
    rec = "[gatescope INFO] group0_0: recorded a CUDA graph for inputs Float[{}] ({} so far)\n"
    warmed = "[gatescope INFO] {} version 1 group0_0: warmed up with 3 forward(s) in 9 ms\n"
    at_load = (rec.format(1, 1) + warmed.format("dgvit_fmnist")
               + rec.format(1, 1) + rec.format(2, 2) + warmed.format("vit_fmnist")
               + rec.format(1, 1) + warmed.format("vit_fmnist__unbatched")
               + "[gatescope WARNING] group0_0: CUDA graphs off for this instance: this server "
                 "was built without CUDA graphs\n"
               + "[gatescope WARNING] vit_fmnist__x2 version 1 group0_0: warm-up stopped, "
                 "serving without it: refused\n")
    later = rec.format(4, 3)  # during vit_fmnist's runs
    got = serve_check.graph_report(at_load + later, "vit_fmnist", since=len(at_load))
    assert got["recorded"] == 2 + 1 + 1
    assert got["off"] == ["group0_0: CUDA graphs off for this instance: this server was built "
                          "without CUDA graphs"]
    dgvit = serve_check.graph_report(at_load + later, "dgvit_fmnist", since=len(at_load + later))
    assert dgvit == {"recorded": 1, "off": []}


def test_ceilings_set_the_stand_ins_rates_beside_each_models_goal():
    run = lambda label, c, rate, ref: {"run": label, "concurrency": c, "throughput": rate,
                                       "reference": ref}
    vit = {"model": "vit_fmnist", "setup": "s", "runs": [
        run("unbatched", 1, 500, 700), run("unbatched", 4, 600, 700),
        run("dynamic", 128, 18000, 40000), run("dynamic, 8 connections", 128, 30000, 40000),
        run("dynamic, 2 instances", 128, 15000, 40000)]}
    floor = {"model": "floor_fmnist", "setup": "s", "runs": [
        run("unbatched", 4, 5950, 1e5), run("dynamic", 128, 17000, 1e6),
        run("dynamic, 8 connections", 128, 68000, 1e6)]}
    other_setup = dict(vit, setup="t")
    lines = serve_check.ceilings({"floor": "floor_fmnist", "overhead": [vit, floor, other_setup]})
    assert len(lines) == 2 and "floor_fmnist" in lines[0]
    assert lines[1] == ("- s, vit_fmnist: unbatched: the goal needs 595/s, the stand-in reached "
                        "5950/s (10.00x); dynamic: the goal needs 34000/s, the stand-in reached "
                        "17000/s (0.50x); dynamic, 8 connections: the goal needs 34000/s, the "
                        "stand-in reached 68000/s (2.00x)")
    assert serve_check.ceilings({"floor": "floor_fmnist", "overhead": [vit]}) == []


def test_a_cuda_graphs_setup_reports_recordings_and_checks_its_answers(tmp_path):
    """A dry run on CPU instances, which never record graphs: the setup's rows say so, and
    its answers after the overhead runs equal the CPU server's (two inputs: a batch call
    within --max-batch); the text model --graph-answers names gets the answers check alone.
    With --connections 2 the dynamic run is repeated over two gRPC connections, and with
    --images-per-call 2 once more with two images in each call."""
    inputs = tmp_path / "inputs"
    subprocess.run(["/usr/bin/python3", str(REPO / "models/tools/write_fashion_mnist_png.py"),
                    "--out", str(inputs / "fmnist"), "--count", "2"], check=True,
                   capture_output=True, timeout=120)
    (inputs / "texts").mkdir()
    for i, text in enumerate(["a small domesticated feline", "a tree " * 12]):
        (inputs / "texts" / f"{i}.txt").write_text(text, encoding="utf-8")
    report = tmp_path / "serve.json"
    done = subprocess.run(
        [sys.executable, str(TOOL), "--build", str(BUILD), "--inputs", str(inputs),
         "--models", str(models_dir(tmp_path, "vit_fmnist", "dgt_wordnet")), "--json", str(report),
         "--second-kind", "KIND_CPU", "--perf", "vit_fmnist", "--max-batch", "2",
         "--graph-answers", "dgt_wordnet", "--setup", "graphs=--torch_threads=1;--cuda_graphs",
         "--connections", "2", "--images-per-call", "2"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "GATESCOPE_OPS_LIB": str(BUILD / "models/ops/libgatescope_ops.so")})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (row,) = json.loads(report.read_text())["overhead"]
    assert row["setup"] == "graphs" and row["cuda_graphs"] == {"recorded": 0, "off": []}
    assert [(u["run"], u["connections"], u["images_per_call"]) for u in row["runs"]] == [
        ("unbatched", 1, 1), ("unbatched", 1, 1), ("dynamic", 1, 1),
        ("dynamic, 2 connections", 2, 1), ("dynamic, 2 connections, 2 images per call", 2, 2),
        ("dynamic, 2 instances", 1, 1)]
    assert all(u["throughput"] > 0 for u in row["runs"])
    # Two calls of two images in flight, and max_batch_size 2: every execution is one call.
    per_call = row["runs"][4]
    assert per_call["concurrency"] == 2 and per_call["server"]["batch"] == pytest.approx(2)
    assert row["graph_answers"]["ok"] and max(row["graph_answers"]["errors"].values()) <= 1e-5
    (text,) = json.loads(report.read_text())["graph_answers"]
    assert text["model"] == "dgt_wordnet" and text["setup"] == "graphs"
    assert text["cuda_graphs"] == {"recorded": 0, "off": []} and text["recorded_on_requests"] == 0
    assert text["graph_answers"]["ok"] and max(text["graph_answers"]["errors"].values()) <= 1e-5
    table = report.with_suffix(".md").read_text()
    assert "| vit_fmnist | graphs | server CUDA graphs: 0 graphs recorded; answers vs CPU ok" in table
    assert "| dgt_wordnet | graphs | 0 / 0 | - | ok (" in table


def test_cpu_against_cpu_run_finds_equal_answers(tmp_path):
    inputs = tmp_path / "inputs"
    subprocess.run(["/usr/bin/python3", str(REPO / "models/tools/write_fashion_mnist_png.py"),
                    "--out", str(inputs / "fmnist"), "--count", "3"], check=True,
                   capture_output=True, timeout=120)
    (inputs / "texts").mkdir()
    for i, text in enumerate(["a small domesticated feline", "caf\u00e9 \U0001F600 " * 30]):
        (inputs / "texts" / f"{i}.txt").write_text(text, encoding="utf-8")
    report = tmp_path / "serve.json"
    done = subprocess.run(
        [sys.executable, str(TOOL), "--build", str(BUILD), "--inputs", str(inputs),
         "--models", str(models_dir(tmp_path, "vit_fmnist", "dgt_wordnet")),
         "--json", str(report), "--second-kind", "KIND_CPU", "--perf", "none"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    answers = {a["model"]: a for a in json.loads(report.read_text())["answers"]}
    assert set(answers) == {"vit_fmnist", "dgt_wordnet"}
    assert answers["vit_fmnist"]["inputs"] == "3 fmnist"
    assert answers["dgt_wordnet"]["inputs"] == "2 texts"
    for a in answers.values():
        assert a["ok"] and a["notes"] == []
        assert "logits" in a["errors"] and max(a["errors"].values()) <= 1e-5
    assert "| vit_fmnist | 3 fmnist |" in report.with_suffix(".md").read_text()


def test_torchscript_reference_and_compat_agree_on_this_torch(tmp_path):
    """scripts/gpu/torchscript_reference.py writes 1.13's outputs; torchscript_compat.py,
    run by the same torch, must find them again (the device run compares 2.11 with them)."""
    models = models_dir(tmp_path, "vit_fmnist", "dgt_wordnet")
    gpu = REPO / "scripts" / "gpu"
    subprocess.run(["/usr/bin/python3", str(gpu / "torchscript_reference.py"), "--repo",
                    str(models), "--out", str(tmp_path)], check=True, capture_output=True,
                   timeout=300)
    report = tmp_path / "compat.json"
    done = subprocess.run(
        ["/usr/bin/python3", str(gpu / "torchscript_compat.py"), "--ref",
         str(tmp_path / "torchscript_reference.pt"), "--repo", str(models), "--devices", "cpu",
         "--json", str(report)], capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(report.read_text())["models"]
    assert set(result) == {"vit_fmnist", "dgt_wordnet"}
    for name, r in result.items():
        assert r["cpu"]["loaded"] and r["cpu"]["max_scaled"] <= 1e-4, (name, r)


def test_a_setup_whose_server_does_not_start_is_reported_and_fails_the_run(tmp_path):
    report = tmp_path / "serve.json"
    done = subprocess.run(
        [sys.executable, str(TOOL), "--build", str(BUILD), "--inputs", str(tmp_path),
         "--models", str(models_dir(tmp_path, "vit_fmnist")), "--json", str(report),
         "--second-kind", "KIND_CPU", "--perf", "none", "--no-answers",
         "--setup", "bad=--forward_cpus=4095"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads(report.read_text())["overhead"]
    assert len(rows) == 1 and rows[0]["setup"] == "bad"
    assert "did not start" in rows[0]["error"] and "forward_cpus" in rows[0]["error"]
    table = report.with_suffix(".md").read_text()
    row = [line for line in table.splitlines() if line.startswith("| - | bad |")]
    assert len(row) == 1 and "server did not start:" in row[0] and row[0].endswith("|")
