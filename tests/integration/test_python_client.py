"""The Python client package (client/python, gatescope_client) against a real server:
numpy in and out for predict, explain and KServe infer, values equal to the models run in
Python, and errors raised with the server's status and words."""
import numpy as np
import pytest
import torch

from gatescope import explain as ref
from gatescope.data import colin27
from gatescope.data.fashion_mnist import write_pngs
from gatescope_client import Client, GatescopeError
from server_harness import serve_shipped
from test_kserve import images as kserve_images  # noqa: F401  (fixture)
from test_kserve import N, START, normalised, reference_logits
from test_explain_serving import load, model_input
from test_segmentation_serving import reference_mask

CLASSIFIER, SEGMENTER = "dgvit_fmnist", "pvt_gdla_colin27"
images = kserve_images


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, [CLASSIFIER, SEGMENTER])


@pytest.fixture(scope="module")
def client(server):
    return Client(f"http://127.0.0.1:{server.http_port}")


def test_health_models_and_metadata(client):
    assert client.live() and client.ready() and client.model_ready(CLASSIFIER)
    assert not client.model_ready("nope")
    assert {m["name"] for m in client.models()} == {CLASSIFIER, SEGMENTER}
    meta = client.metadata(CLASSIFIER)
    assert meta["task"] == "image_classification" and len(meta["labels"]) == 10
    assert client.config(CLASSIFIER)["max_batch_size"] >= 1


def test_predict_from_pixels_and_png_equals_the_model(client, images, tmp_path):
    logits = reference_logits(CLASSIFIER, images)
    probs = torch.softmax(torch.from_numpy(logits), -1).numpy()
    labels = client.metadata(CLASSIFIER)["labels"]
    paths = [p for p, _ in write_pngs(tmp_path, start=START, count=N)]
    for i, image in enumerate(images):
        for sent in (image[None], paths[i].read_bytes()):  # uint8 [1,28,28], then a PNG
            out = client.predict(CLASSIFIER, sent, top_k=3)
            top = np.argsort(-logits[i])[:3]
            assert [c["index"] for c in out["classes"]] == list(top)
            assert [c["label"] for c in out["classes"]] == [labels[j] for j in top]
            np.testing.assert_allclose([c["probability"] for c in out["classes"]],
                                       probs[i][top], atol=1e-5)


def test_explain_returns_numpy_maps_equal_to_python(client, images, tmp_path):
    out = client.explain(CLASSIFIER, images[0][None], gates=True, attention_layers=[0])
    assert out["rollout"].dtype == np.float32 and out["rollout"].shape == (4, 4)
    png = write_pngs(tmp_path, start=START, count=1)[0][0].read_bytes()
    pictured = client.explain(CLASSIFIER, png, heatmap_png=True)
    assert pictured["rollout_png"][:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_allclose(pictured["rollout"], out["rollout"], atol=1e-5)
    with torch.no_grad():
        maps = load(CLASSIFIER).explain(model_input(images[:1]))
    want = ref.rollout([m[0] for m in maps["attention"]])[0, 1:].reshape(4, 4).numpy()
    np.testing.assert_allclose(out["rollout"], want, atol=1e-5)
    assert len(out["gates"]) == len(maps["gate"])
    for got, gate in zip(out["gates"], maps["gate"]):
        np.testing.assert_allclose(got, gate[0, :, 1:].reshape(-1, 4, 4).numpy(), atol=1e-5)
    np.testing.assert_allclose(out["attention"][0], maps["attention"][0][0].numpy(), atol=1e-5)


def test_predict_segmentation_mask_is_numpy(client):
    image = colin27.load_slices()["test"]["images"][0]
    out = client.predict(SEGMENTER, image)
    mask = out["segmentation"]["mask"]
    assert mask.dtype == np.uint8 and mask.shape == image.shape
    np.testing.assert_array_equal(mask, reference_mask(SEGMENTER, image))


def test_infer_binary_tensors_and_classification(client, images):
    x = normalised(images)
    out = client.infer(CLASSIFIER, x)
    assert list(out) == ["logits", "gate_mean"]
    np.testing.assert_allclose(out["logits"], reference_logits(CLASSIFIER, images), atol=1e-4)
    pixels = client.infer(CLASSIFIER, images[:, None], outputs=["logits"])
    np.testing.assert_allclose(pixels["logits"], out["logits"], atol=1e-4)
    top = client.infer(CLASSIFIER, x, outputs=["logits"], classification=2)["logits"]
    assert top.shape == (len(images), 2)
    assert [int(s.split(b":")[1]) for s in top[:, 0]] == list(out["logits"].argmax(1))


def test_errors_carry_status_and_message(client, images):
    with pytest.raises(GatescopeError) as e:
        client.predict("nope", images[0][None])
    assert e.value.status == 404 and "nope" in e.value.message
    with pytest.raises(GatescopeError) as e:
        client.infer(CLASSIFIER, np.zeros((1, 3, 28, 28), np.float32))
    assert e.value.status == 400
    with pytest.raises(GatescopeError) as e:
        client.explain(CLASSIFIER, b"not an image")
    assert e.value.status == 400


def test_threads_share_a_client_and_each_gets_its_own_answers(server, images):
    """Eight threads on one Client (each on its own kept-alive connection) get the answers
    to their own requests, the same as one thread gets."""
    from concurrent.futures import ThreadPoolExecutor
    with Client(f"http://127.0.0.1:{server.http_port}") as shared:
        want = [shared.predict(CLASSIFIER, image[None], top_k=1)["classes"][0]["index"]
                for image in images]
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(
                lambda i: shared.predict(CLASSIFIER, images[i % len(images)][None],
                                         top_k=1)["classes"][0]["index"], range(64)))
    assert got == [want[i % len(images)] for i in range(64)]
    assert want == list(reference_logits(CLASSIFIER, images).argmax(1))
