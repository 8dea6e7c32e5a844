"""Triton's gRPC client code paths, from a client-side copy of the protocol written from its
specification (spec_proto/, run in its own process by triton_client_check.py): unary and
streaming inference, the classification extension, uint64 priority, refused load
overrides, statistics, and the declared configuration, each checked against the model run
in Python."""
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from server_harness import REPO, serve_shipped
from test_kserve import images as kserve_images  # noqa: F401  (fixture)
from test_kserve import normalised, reference_logits

MODEL = "dgvit_fmnist"
images = kserve_images


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, [MODEL], extra=["--model_control=explicit"])


@pytest.fixture(scope="module")
def seen(server, images, tmp_path_factory):
    buf = io.BytesIO()
    np.save(buf, normalised(images))
    run = subprocess.run([sys.executable, str(REPO / "tests/integration/triton_client_check.py"),
                          server.address, MODEL, str(tmp_path_factory.mktemp("spec_stubs"))],
                         input=buf.getvalue(), capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr.decode()
    return json.loads(run.stdout)


def test_metadata_and_configuration(seen):
    assert seen["live"] and seen["ready"]
    assert seen["outputs"] == ["logits", "gate_mean"]
    assert seen["max_batch_size"] >= 1 and len(seen["labels"]) == 10


def test_unary_inference_equals_the_model(seen, images):
    assert seen["unary_id"] == "unary"
    got = np.array(seen["logits"]["data"], np.float32).reshape(seen["logits"]["shape"])
    np.testing.assert_allclose(got, reference_logits(MODEL, images), atol=1e-4)


def test_classification_extension(seen, images):
    cls = seen["classification"]
    assert cls["shape"] == [len(images), 3]
    ref = reference_logits(MODEL, images)
    rows = np.array(cls["data"]).reshape(len(images), 3)
    for row, want in zip(rows, ref):
        score, index, label = zip(*(s.split(":") for s in row))
        assert [int(i) for i in index] == list(np.argsort(-want)[:3])
        np.testing.assert_allclose([float(v) for v in score], np.sort(want)[::-1][:3], atol=1e-4)
        assert all(label) and label[0] == seen["labels"][int(index[0])]


def test_priority_as_uint64_is_checked(seen):
    assert seen["priority_99"] == "INVALID_ARGUMENT"


def test_streaming_answers_every_request(seen, images):
    stream = seen["stream"]
    assert set(stream) == {f"s{i}" for i in range(len(images))} | {"bad"}
    assert isinstance(stream["bad"], str) and "no_such_model" in stream["bad"]
    ref = reference_logits(MODEL, images)
    for i in range(len(images)):
        np.testing.assert_allclose(stream[f"s{i}"]["data"], ref[i], atol=1e-4)


def test_load_override_refused_and_statistics(seen, images):
    assert seen["load_with_config"] == "INVALID_ARGUMENT"
    s = seen["stats"]
    # Examples: 6 (unary) + 6 (classification) + 6 (stream) ran; the priority-99 call
    # was refused before queuing and the bad stream request named no model of this one.
    assert s["inference_count"] == 3 * len(images)
    assert s["queue"] == s["compute_infer"] == s["inference_count"]
    assert s["success"] == 3 * len(images)
    assert sum(int(b) * n for b, n in s["batches"].items()) == s["inference_count"]
    assert sum(s["batches"].values()) == s["execution_count"]
    assert seen["missing_version"] == "NOT_FOUND"
