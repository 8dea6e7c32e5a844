"""The soak-and-faults run (tests/soak/soak.py, docs/soak.md) in its short mode (~3 min on 2
cores) against the built server and the shipped repository, with the server flags of the
Kubernetes base Deployment; every bound is asserted on the JSON summary's numbers."""
import json
import pathlib
import subprocess

import pytest

from gatescope.export.archive import read_metadata

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    out = tmp_path_factory.mktemp("soak") / "summary.json"
    proc = subprocess.run(["/usr/bin/python3", str(HERE / "soak.py"), "--mode", "short",
                           "--json-out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode in (0, 1), proc.stderr[-4000:]  # 2: could not run at all
    s = json.loads(out.read_text())
    s["_returncode"], s["_stderr"] = proc.returncode, proc.stderr[-4000:]
    return s


def shipped_models():
    return sorted(p.name for p in (REPO / "model_repository").iterdir()
                  if p.is_dir() and (p / "1" / "model.pt").exists())


def driven_models():
    """The shipped models the soak sends traffic to: all but the text models, which it loads
    but has no workload for yet (summary["setup"]["not_driven"])."""
    return sorted(n for n in shipped_models()
                  if read_metadata(REPO / "model_repository" / n / "1" / "model.pt")["task"]
                  != "text_classification")


def no_wrong_or_lost(phase):
    assert phase["wrong"] == 0, phase.get("examples")
    assert phase["lost"] == 0, phase.get("examples")


def test_every_bound_held(summary):
    assert summary["violations"] == [], summary["_stderr"]
    assert summary["passed"] and summary["_returncode"] == 0


def test_references_agree_with_the_python_models(summary):
    refs = summary["references"]
    assert sorted(refs["models"]) == driven_models() == summary["models"]
    assert set(refs["python_mismatches"]) == set(driven_models())
    assert all(n == 0 for n in refs["python_mismatches"].values()), refs["python_mismatches"]


def test_saturation_every_model_both_apis_all_correct(summary):
    sat = summary["saturation"]
    no_wrong_or_lost(sat)
    # concurrency 24 < every model's queue (256): nothing may be refused, not even
    # RESOURCE_EXHAUSTED
    assert sat["errors_total"] == 0, sat["errors"]
    assert sat["seconds"] >= 80
    assert sat["sent"] == sat["ok"] >= 3000  # measured 26,073 (2 loaded cores)
    for model in driven_models():
        for api in ("v1", "kserve"):
            row = sat["per_model"][model][api]
            assert row["ok"] >= 5 and row["ok"] == row["sent"], (model, api, row)
    assert sat["server_count_mismatch"] == {}


def test_saturation_memory_is_bounded(summary):
    rss = summary["saturation"]["rss"]
    bounds = summary["bounds"]
    assert rss["warmup_end_s"] is not None and rss["warmup_end_s"] <= 60
    assert rss["idle_growth_after_warmup_mib"] is not None
    assert rss["idle_growth_after_warmup_mib"] <= bounds["idle_rss_growth_after_warmup_mib"]
    assert bounds["peak_rss_mib"] == 2048  # the base Deployment's memory limit, 2Gi
    assert rss["vm_hwm_mib"] <= bounds["peak_rss_mib"]
    assert rss["start_mib"] <= rss["peak_mib"] <= rss["vm_hwm_mib"] + 1
    assert len(rss["checkpoints"]) >= 8
    assert all(c["drained_s"] is not None for c in rss["checkpoints"])
    assert summary["shutdown"]["vm_hwm_since_restart_mib"] <= bounds["peak_rss_mib"]


def test_sigkill_restart_is_ready_and_correct(summary):
    [r] = summary["restart"]
    no_wrong_or_lost(r["traffic"])
    assert r["new_pid"] != r["old_pid"] and r["same_ports"]
    assert r["calls_in_flight_at_kill"] > 0  # killed under load
    assert 0 < r["process_gone_s"] <= r["listening_s"]
    for moment in ("health_serving_s", "server_ready_s", "first_correct_answer_s"):
        assert r["listening_s"] <= r[moment] <= summary["bounds"]["restart_first_answer_s"]
    assert r["all_models_correct_s"] is not None and r["traffic_resumed_s"] is not None
    # While no server listens, calls fail fast with UNAVAILABLE; nothing else, and nothing
    # once it is ready.
    assert set(r["traffic"]["errors"]) <= {"UNAVAILABLE"}
    assert r["errors_after_ready"] == 0
    assert r["traffic"]["ok"] > 0


def test_explain_storm_answers_correctly_and_drains(summary):
    ex = summary["explain_storm"]
    no_wrong_or_lost(ex)
    assert ex["errors_total"] == 0, ex["errors"]
    assert ex["explain_calls"] >= 100 and ex["ok"] == ex["sent"]
    assert ex["drained_s"] is not None


def test_cancellation_storm_drains_and_leaves_the_server_correct(summary):
    cs = summary["cancel_storm"]
    no_wrong_or_lost(cs)
    assert set(cs["errors"]) <= {"CANCELLED", "DEADLINE_EXCEEDED"}, cs["errors"]
    assert cs["errors"].get("CANCELLED", 0) > 0 and cs["errors"].get("DEADLINE_EXCEEDED", 0) > 0
    assert min(cs["kinds"].values()) > 0 and cs["sent"] >= 300
    assert cs["drained_s"] is not None and cs["drained_s"] <= summary["bounds"]["drain_s"]
    assert all(v == 0 for v in cs["pending_after"].values())
    assert set(cs["pending_after"]) == set(shipped_models())
    assert cs["sweep_problems"] == []
    assert summary["shutdown"]["exit_code"] == 0


def test_poll_faults_keep_serving_the_good_version(summary):
    pf = summary["poll_faults"]
    no_wrong_or_lost(pf)
    assert pf["errors_total"] <= pf["max_errors"]
    assert set(pf["errors"]) <= {"UNAVAILABLE", "NOT_FOUND"}
    assert pf["exit_code"] == 0
    assert len(pf["steps"]) == 5
    for step in pf["steps"]:
        assert step["server_alive"], step
        assert step["detected_s"] is not None and step["detected_s"] <= 10, step
        assert step["ok"] > 0, step
    corrupt, partial, completed, removed, cleaned = pf["steps"]
    model = pf["model"]
    assert corrupt["index"][f"{model}/1"] == "READY"
    assert not corrupt["index"][f"{model}/2"].startswith("READY")
    assert not partial["index"][f"{model}/3"].startswith("READY")
    assert not partial["index"][f"{model}/4"].startswith("READY")
    assert completed["index"][f"{model}/4"] == "READY"
    assert completed["default_answers_from"] == "4"
    assert f"{model}/4" not in removed["index"] and removed["default_answers_from"] == "1"
    assert list(cleaned["index"]) == [f"{model}/1"]
    versions = pf["answers_by_version"]
    assert versions.get("default:4", 0) > 0 and versions.get("default:1", 0) > 0
    assert set(versions) <= {"default:1", "default:4", "pinned:1"}
