"""benchmarks/bench_serving_paired.py: the slots alternate so that a steady drift favours
neither side, each ratio is a served slot over the in-process slot beside it, and the
forward worker times the model under the server's allocator."""
import sys

import pytest

from server_harness import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_serving_paired import (ForwardWorker, alternate, ratio_summary,  # noqa: E402
                                  sweep_batches)


def test_slots_alternate_in_process_first_then_served_first():
    order = []

    def in_process():
        order.append("C")
        return 100.0

    def served():
        order.append("S")
        return {"throughput": 90.0}

    pairs = alternate(4, in_process, served)
    assert "".join(order) == "CSSCCSSC"
    assert [(c, s) for c, s, _ in pairs] == [(100.0, 90.0)] * 4


def test_requests_of_several_inputs_pair_their_inferences_not_their_requests():
    # --client-batch: a served slot of 100 requests/s of 8 inputs each delivers 800 images/s,
    # which is what the in-process images/s compare with.
    row = {"throughput": 100.0, "inferences_per_s": 800.0, "batch_size": 8}
    pairs = alternate(2, lambda: 1000.0, lambda: row, "inferences_per_s")
    assert [(c, s) for c, s, _ in pairs] == [(1000.0, 800.0)] * 2
    assert ratio_summary(pairs)["median"] == pytest.approx(0.8)


def test_a_steady_drift_cancels_in_the_median_of_the_pairs():
    # The machine slows by 10 per slot; the server always delivers 80 % of the forward's
    # rate at that moment. Each pair's two slots are adjacent, so every ratio stays near 0.8
    # and the ones that read high (in-process first) and low (served first) alternate.
    clock = iter(range(1000))

    def speed():
        return 1000.0 - 10 * next(clock)

    pairs = alternate(8, speed, lambda: {"throughput": 0.8 * speed()})
    r = ratio_summary(pairs)
    ratios = [s / c for c, s, _ in pairs]
    assert all(abs(x - 0.8) < 0.02 for x in ratios)
    assert ratios[0] < 0.8 < ratios[1]  # C then S: slower served slot; S then C: the reverse
    assert r["median"] == pytest.approx(0.8, abs=0.002)
    assert r["q1"] <= r["median"] <= r["q3"]
    assert r["spread"] == pytest.approx(1000 / 850)  # slots 0 .. 15, in-process ones spread


class DriftingWorker:
    """A forward worker whose machine slows by 10 % of its first speed per slot; the model
    itself runs every batch size at `rates`."""

    def __init__(self, rates):
        self.rates, self.asked = rates, []

    def rate(self, batch, seconds):
        speed = 1.0 - 0.1 * len(self.asked)
        self.asked.append(batch)
        return {"batch": batch, "images_per_s": self.rates[batch] * speed, "seconds": seconds}


def test_the_sweep_times_each_batch_up_then_down_and_takes_the_mean():
    worker = DriftingWorker({1: 100.0, 2: 100.0, 4: 100.0})
    sweep = sweep_batches(worker, [1, 2, 4], 0.5)
    assert worker.asked == [1, 2, 4, 4, 2, 1]
    # Speeds 1.0 .9 .8 .7 .6 .5: each size's two slots sum to 1.5, so equal models stay equal
    # (timed once, going up, the drift would have ranked batch 1 first).
    assert [s["batch"] for s in sweep] == [1, 2, 4]
    assert [s["images_per_s"] for s in sweep] == [pytest.approx(75.0)] * 3
    assert all(s["seconds"] == 0.5 for s in sweep)


def test_the_summary_of_known_pairs():
    pairs = [(100.0, 80.0, {}), (200.0, 180.0, {}), (100.0, 70.0, {}), (50.0, 50.0, {})]
    r = ratio_summary(pairs)
    assert r["median"] == pytest.approx(0.85)  # ratios 0.7 0.8 0.9 1.0
    assert (r["q1"], r["q3"]) == (pytest.approx(0.775), pytest.approx(0.925))
    assert r["pooled"] == pytest.approx(380 / 450)
    assert r["spread"] == pytest.approx(4.0)
    one = ratio_summary([(100.0, 90.0, {})])
    assert one["median"] == one["q1"] == one["q3"] == pytest.approx(0.9)


def test_the_forward_worker_times_the_model_at_each_asked_batch():
    path = REPO / "model_repository" / "vit_fmnist" / "1" / "model.pt"
    worker = ForwardWorker(path, "0", 1, 0)
    try:
        assert worker.meta["task"] == "image_classification"
        assert worker.meta["max_batch_size"] >= 4
        for batch in (1, 4):
            summary = worker.rate(batch, 0.05)
            assert summary["batch"] == batch
            assert summary["forwards"] >= 5  # the tuner's minimum of timed calls
            assert summary["images_per_s"] > 0
            assert 0 < summary["p50_ms"] <= summary["p99_ms"]
    finally:
        worker.close()
    assert worker.proc.returncode == 0
