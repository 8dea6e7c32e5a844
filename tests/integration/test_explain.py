"""Explain endpoint: rollout, gate and attention maps from the server equal the Python
reference computation on the same checkpoint and input."""
import concurrent.futures
import importlib
import sys

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, generate_python_stubs
from gatescope import explain as ref
from gatescope import ops
from gatescope.data import fashion_mnist
from gatescope.data.png import encode_gray_png

INDEX = 9200


@pytest.fixture(scope="module")
def v1(tmp_path_factory):
    out = tmp_path_factory.mktemp("v1_stubs")
    generate_python_stubs(out, "inference/model_config.proto", "gatescope/v1/model_config.proto",
                          "gatescope/v1/inference.proto")
    sys.path.insert(0, str(out))  # for the `inference` package the messages import
    # The generated modules live in package gatescope.v1; graft them onto the model
    # package of the same name.
    import gatescope
    gatescope.__path__.append(str(out / "gatescope"))
    return (importlib.import_module("gatescope.v1.inference_pb2"),
            importlib.import_module("gatescope.v1.inference_pb2_grpc"))


@pytest.fixture(scope="module")
def stub(server, v1):
    channel = grpc.insecure_channel(server.address)
    yield v1[1].InferenceStub(channel)
    channel.close()


@pytest.fixture(scope="module")
def image():
    images, _ = fashion_mnist.load_split("t10k")
    return images[INDEX]


def python_maps(model_name, image):
    ops.load()
    module = torch.jit.load(str(REPO / "model_repository" / model_name / "1" / "model.pt"))
    x = torch.from_numpy(image.astype(np.float32) / 255.0)[None, None]
    with torch.no_grad():
        return module.explain((x - fashion_mnist.MEAN) / fashion_mnist.STD)


def as_array(t):
    return np.frombuffer(t.data, dtype="<f4").reshape(tuple(t.shape))


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return h, w


@pytest.mark.parametrize("options", [
    dict(),
    dict(head_fusion="max", signed_maps="abs", discard_ratio=0.5),
    dict(head_fusion="min", signed_maps="raw", start_layer=2),
])
@pytest.mark.parametrize("model", ["dgvit_fmnist", "vit_fmnist"])
def test_rollout_matches_python_reference(stub, v1, image, model, options):
    pb = v1[0]
    req = pb.ExplainRequest(model_name=model, image=encode_gray_png(image), rollout=True,
                            heatmap_png=True, attention_layers=[0, 3],
                            rollout_options=pb.RolloutOptions(**options))
    resp = stub.Explain(req, timeout=60)
    maps = python_maps(model, image)
    layers = [a[0] for a in maps["attention"]]
    kw = dict(head_fusion=options.get("head_fusion", "mean"),
              signed=options.get("signed_maps", "clamp"),
              discard_ratio=options.get("discard_ratio", 0.0),
              start_layer=options.get("start_layer", 0))
    want = ref.rollout(layers, **kw)[0, 1:].reshape(4, 4).numpy()
    got = as_array(resp.rollout)
    assert got.shape == (4, 4)
    # 1e-5 absolute; raw signed maps can amplify the rollout past 1, where the bound
    # scales with its magnitude (inputs differ in the last float bit between the paths).
    assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max())
    for i, layer in enumerate([0, 3]):
        np.testing.assert_allclose(as_array(resp.attention[i]), layers[layer].numpy(), atol=1e-5)
    # The input enlarged 6x (to at least 160 px wide) over a 24 px colour bar.
    assert png_size(resp.rollout_png) == (28 * 6 + 24, 28 * 6)
    assert resp.classes[0].label in fashion_mnist.CLASS_NAMES


def test_gates_match_python(stub, v1, image):
    pb = v1[0]
    resp = stub.Explain(pb.ExplainRequest(model_name="dgvit_fmnist", image=encode_gray_png(image),
                                          gates=True), timeout=60)
    maps = python_maps("dgvit_fmnist", image)
    assert len(resp.gates) == len(maps["gate"]) == 4
    for got, want in zip(resp.gates, maps["gate"]):
        np.testing.assert_allclose(as_array(got), want[0, :, 1:].reshape(4, 4, 4).numpy(),
                                   atol=1e-6)


def test_bad_explain_parameters(stub, v1, image):
    pb = v1[0]
    png = encode_gray_png(image)
    bad = [
        pb.ExplainRequest(model_name="dgvit_fmnist", image=png, attention_layers=[4]),
        pb.ExplainRequest(model_name="dgvit_fmnist", image=png, rollout=True,
                          rollout_options=pb.RolloutOptions(discard_ratio=1.0)),
        pb.ExplainRequest(model_name="dgvit_fmnist", image=png, rollout=True,
                          rollout_options=pb.RolloutOptions(start_layer=9)),
        pb.ExplainRequest(model_name="dgvit_fmnist", image=png, rollout=True,
                          rollout_options=pb.RolloutOptions(head_fusion="median")),
        pb.ExplainRequest(model_name="vit_fmnist", image=png, gates=True),
        pb.ExplainRequest(model_name="dgvit_fmnist", image=b"not an image", rollout=True),
    ]
    for req in bad:
        with pytest.raises(grpc.RpcError) as err:
            stub.Explain(req, timeout=60)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, req


def test_explain_under_load_leaves_predictions_alone(stub, v1, server, image):
    """Explain requests interleaved with predictions: every prediction is unchanged."""
    pb = v1[0]
    images, _ = fashion_mnist.load_split("t10k")
    pngs = [encode_gray_png(images[i]) for i in range(9300, 9316)]
    alone = [stub.Predict(pb.PredictRequest(model_name="dgvit_fmnist", image=p)).classes[0]
             for p in pngs]

    def predict(i):
        return stub.Predict(pb.PredictRequest(model_name="dgvit_fmnist", image=pngs[i % 16]))

    def explain(i):
        return stub.Explain(pb.ExplainRequest(model_name="dgvit_fmnist", image=pngs[i % 16],
                                              rollout=True, gates=True))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        preds = [pool.submit(predict, i) for i in range(48)]
        exps = [pool.submit(explain, i) for i in range(16)]
        for i, f in enumerate(preds):
            c = f.result(timeout=120).classes[0]
            assert c.label == alone[i % 16].label
            assert abs(c.probability - alone[i % 16].probability) < 1e-5
        for f in exps:
            assert f.result(timeout=120).rollout.shape == [4, 4]


def test_client_explain_writes_panel_and_npy(server, tmp_path, image):
    import json
    src = tmp_path / "in.png"
    src.write_bytes(encode_gray_png(image))
    out = tmp_path / "out"
    res = server.client("explain", "--model", "dgvit_fmnist", "--rollout", "--gates",
                        "--out", str(out), str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    line = json.loads(res.stdout.splitlines()[0])
    assert png_size(open(line["png"], "rb").read()) == (28 * 6 + 24, 28 * 6)
    # input | rollout | 4 gate tiles: 112 px tiles under an 18 px title, over a 24 px colour
    # bar and a 30 px caption strip
    assert png_size(open(line["panel"], "rb").read()) == (18 + 112 + 24 + 30, 6 * 112)
    rollout = np.load(out / "in.png.rollout.npy")
    gates = np.load(out / "in.png.gates.npy")
    assert rollout.shape == (4, 4) and gates.shape == (4, 4, 4, 4)
    maps = python_maps("dgvit_fmnist", image)
    want = ref.rollout([m[0] for m in maps["attention"]])[0, 1:].reshape(4, 4)
    assert np.abs(rollout - want.numpy()).max() <= 1e-5
    want_gates = torch.stack([g[0, :, 1:] for g in maps["gate"]]).reshape(4, 4, 4, 4)
    assert np.abs(gates - want_gates.numpy()).max() <= 1e-5


def test_client_explain_json_format(server, tmp_path, image):
    import json
    src = tmp_path / "in.png"
    src.write_bytes(encode_gray_png(image))
    res = server.client("explain", "--model", "dgvit_fmnist", "--rollout", "--format", "json",
                        "--out", str(tmp_path / "out"), str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.load(open(json.loads(res.stdout.splitlines()[0])["json"]))
    assert np.array(data["rollout"]).shape == (4, 4)
