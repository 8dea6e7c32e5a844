"""PLuG-DeiT served: predictions equal the Python model's, PLuG gate rows and rollout from
the server (gatescope.v1 and KServe) equal the Python reference, a model without PLuG gates
refuses them, and the client writes the gate rows."""

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, api_stubs, serve_shipped
from gatescope import explain as ref
from gatescope import ops
from gatescope.data import fashion_mnist
from gatescope.data.png import encode_gray_png

MODEL, PLAIN, OTHER = "plug_deit_fmnist", "deit_fmnist", "vit_fmnist"
START, N = 700, 16


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, (MODEL, PLAIN, OTHER))


@pytest.fixture(scope="module")
def stubs(server, tmp_path_factory):
    yield from api_stubs(server, tmp_path_factory)


@pytest.fixture(scope="module")
def images():
    return fashion_mnist.load_split("t10k")[0][START:START + N]


def model_input(images):
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - fashion_mnist.MEAN) / fashion_mnist.STD


def load(name):
    ops.load()
    return torch.jit.load(str(REPO / "model_repository" / name / "1" / "model.pt"))


def as_array(t):
    return np.frombuffer(t.data, dtype="<f4").reshape(tuple(t.shape))


def test_predictions_equal_the_python_model(stubs, images):
    _, _, v1, stub = stubs
    for name in (MODEL, PLAIN):
        with torch.no_grad():
            want = load(name)(model_input(images))["logits"].softmax(-1)
        for i, image in enumerate(images):
            resp = stub.Predict(v1.PredictRequest(model_name=name, image=encode_gray_png(image),
                                                  top_k=1), timeout=60)
            assert resp.classes[0].index == int(want[i].argmax())
            assert abs(resp.classes[0].probability - float(want[i].max())) < 1e-4


def test_gate_rows_and_rollout_equal_the_reference(stubs, images):
    _, _, v1, stub = stubs
    resp = stub.Explain(v1.ExplainRequest(model_name=MODEL, image=encode_gray_png(images[2]),
                                          plug_gates=True, rollout=True,
                                          attention_queries=[0, 9]), timeout=60)
    with torch.no_grad():
        maps = load(MODEL).explain(model_input(images[2:3]))
    assert len(resp.plug_gates) == 4
    for layer, got in enumerate(resp.plug_gates):
        want = maps["plug_gate"][layer][0][[0, 9]].numpy()
        assert as_array(got).shape == (2, 17)
        assert np.abs(as_array(got) - want).max() <= 1e-5
    assert max(np.abs(as_array(g)).max() for g in resp.plug_gates) > 1e-3  # the gate is on
    want = ref.rollout([m[0] for m in maps["attention"]])[0, 1:].reshape(4, 4).numpy()
    assert np.abs(as_array(resp.rollout) - want).max() <= 1e-5


def test_kserve_plug_gates_output(stubs, images):
    kv, stub, _, _ = stubs
    req = kv.ModelInferRequest(model_name=MODEL)
    req.inputs.add(name="input", datatype="UINT8", shape=[2, 28, 28])
    req.raw_input_contents.append(images[:2].astype(np.uint8).tobytes())
    req.parameters["explain"].string_param = "plug_gates"
    resp = stub.ModelInfer(req, timeout=60)
    i = [o.name for o in resp.outputs].index("plug_gates")
    got = np.frombuffer(resp.raw_output_contents[i], dtype="<f4").reshape(tuple(resp.outputs[i].shape))
    with torch.no_grad():
        maps = load(MODEL).explain(model_input(images[:2]))
    want = torch.stack([g for g in maps["plug_gate"]], dim=1).numpy()  # [B, L, N, N]
    assert got.shape == (2, 4, 17, 17)
    assert np.abs(got - want).max() <= 1e-5


def test_models_without_plug_gates_refuse_them(stubs, images):
    _, _, v1, stub = stubs
    for name in (PLAIN, OTHER):
        with pytest.raises(grpc.RpcError) as err:
            stub.Explain(v1.ExplainRequest(model_name=name, image=encode_gray_png(images[0]),
                                           plug_gates=True), timeout=60)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "PLuG" in err.value.details()


def test_client_writes_gate_rows(server, images, tmp_path):
    png = tmp_path / "shirt.png"
    png.write_bytes(encode_gray_png(images[5]))
    r = server.client("explain", "--model", MODEL, "--plug-gates", "--queries", "0",
                      "--out", str(tmp_path / "out"), str(png))
    assert r.returncode == 0, r.stderr
    rows = np.load(tmp_path / "out" / "shirt.png.plug_gates.npy")
    with torch.no_grad():
        maps = load(MODEL).explain(model_input(images[5:6]))
    want = torch.stack([g[0][[0]] for g in maps["plug_gate"]]).numpy()
    assert rows.shape == (4, 1, 17) and np.abs(rows - want).max() <= 1e-5
    assert (tmp_path / "out" / "shirt.png.panel.png").stat().st_size > 0
