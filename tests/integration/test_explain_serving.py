"""Explanations as a served feature: through KServe ModelInfer parameters, under the byte
cap, DAR resonance maps equal to the Python reference, and per-layer gate / vigilance
statistics of served predictions in /metrics."""
import re
import urllib.request

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, api_stubs, start_server, stop_server
from gatescope import explain as ref
from gatescope import ops
from gatescope.data import fashion_mnist
from gatescope.data.png import encode_gray_png

START, N = 300, 12
CAP = 42_000  # bytes: a dgvit rollout (26,040) and the DAR test (41,000) fit; dgvit with all
# four full attention layers (44,536) does not, nor one KServe call explaining two examples
# (their explanations count together)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("server"), REPO / "model_repository",
                       extra=[f"--explain_max_bytes={CAP}"])
    yield srv
    assert stop_server(srv) == 0, srv.log()


@pytest.fixture(scope="module")
def stubs(server, tmp_path_factory):
    yield from api_stubs(server, tmp_path_factory)


@pytest.fixture(scope="module")
def uncapped_stubs(tmp_path_factory):
    """A server with the default cap, for KServe calls explaining several examples."""
    srv = start_server(tmp_path_factory.mktemp("uncapped"), REPO / "model_repository")
    yield from api_stubs(srv, tmp_path_factory)
    assert stop_server(srv) == 0, srv.log()


@pytest.fixture(scope="module")
def images():
    imgs, _ = fashion_mnist.load_split("t10k")
    return imgs[START:START + N]


def model_input(images):
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - fashion_mnist.MEAN) / fashion_mnist.STD


def load(model_name):
    ops.load()
    return torch.jit.load(str(REPO / "model_repository" / model_name / "1" / "model.pt"))


def as_array(t):
    return np.frombuffer(t.data, dtype="<f4").reshape(tuple(t.shape))


def infer(kv, stub, model, images, params, outputs=()):
    req = kv.ModelInferRequest(model_name=model)
    req.inputs.add(name="input", datatype="UINT8", shape=[len(images), 28, 28])
    req.raw_input_contents.append(images.astype(np.uint8).tobytes())
    for key, value in params.items():
        if isinstance(value, str):
            req.parameters[key].string_param = value
        elif isinstance(value, float):
            req.parameters[key].double_param = value
        else:
            req.parameters[key].int64_param = value
    for o in outputs:
        req.outputs.add(name=o)
    return stub.ModelInfer(req, timeout=60)


def output(resp, name):
    i = [o.name for o in resp.outputs].index(name)
    o = resp.outputs[i]
    return np.frombuffer(resp.raw_output_contents[i], dtype="<f4").reshape(tuple(o.shape))


def test_kserve_explain_parameters_match_the_reference(uncapped_stubs, images):
    kv, stub, _, _ = uncapped_stubs
    resp = infer(kv, stub, "dgvit_fmnist", images[:3],
                 {"explain": "rollout,gates", "rollout_head_fusion": "max",
                  "rollout_discard_ratio": 0.25})
    assert sorted(o.name for o in resp.outputs) == ["gates", "logits", "rollout"]
    rollout, gates = output(resp, "rollout"), output(resp, "gates")
    assert rollout.shape == (3, 4, 4) and gates.shape == (3, 4, 4, 4, 4)
    with torch.no_grad():
        maps = load("dgvit_fmnist").explain(model_input(images[:3]))
    for b in range(3):
        want = ref.rollout([m[b] for m in maps["attention"]], head_fusion="max",
                           discard_ratio=0.25)[0, 1:].reshape(4, 4).numpy()
        assert np.abs(rollout[b] - want).max() <= 1e-5
        want_gates = torch.stack([g[b, :, 1:] for g in maps["gate"]]).reshape(4, 4, 4, 4)
        assert np.abs(gates[b] - want_gates.numpy()).max() <= 1e-5
    np.testing.assert_allclose(output(resp, "logits"), maps["logits"][0].numpy(), atol=1e-4)


def test_kserve_explain_bad_parameters(stubs, images):
    kv, stub, _, _ = stubs
    cases = [({"explain": "rollout,saliency"}, "unknown kind"),
             ({"explain": "resonance"}, "no resonance"),
             ({"explain": "rollout", "rollout_discard_ratio": 1.0}, "discard_ratio"),
             ({"explain_attention_layers": "7"}, "out of range")]
    for params, message in cases:
        with pytest.raises(grpc.RpcError) as err:
            infer(kv, stub, "dgvit_fmnist", images[:1], params)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, params
        assert message in err.value.details()
    with pytest.raises(grpc.RpcError) as err:  # explanation outputs need the parameter
        infer(kv, stub, "dgvit_fmnist", images[:1], {}, outputs=["rollout"])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_attention_maps_of_chosen_heads_and_queries(stubs, images):
    _, _, v1, v1_stub = stubs
    png = encode_gray_png(images[3])
    resp = v1_stub.Explain(v1.ExplainRequest(model_name="dgvit_fmnist", image=png,
                                             attention_layers=[1, 3], attention_heads=[2],
                                             attention_queries=[0, 5]), timeout=60)
    with torch.no_grad():
        maps = load("dgvit_fmnist").explain(model_input(images[3:4]))
    assert len(resp.attention) == 2
    for got, layer in zip(resp.attention, [1, 3]):
        want = maps["attention"][layer][0][2:3][:, [0, 5]].numpy()
        assert as_array(got).shape == (1, 2, 17)
        assert np.abs(as_array(got) - want).max() <= 1e-5
    with pytest.raises(grpc.RpcError) as err:
        v1_stub.Explain(v1.ExplainRequest(model_name="dgvit_fmnist", image=png,
                                          attention_layers=[0], attention_heads=[4]), timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_explain_over_the_byte_cap_is_refused_and_serving_goes_on(stubs, images):
    kv, stub, v1, v1_stub = stubs
    png = encode_gray_png(images[0])
    ok = v1_stub.Explain(v1.ExplainRequest(model_name="dgvit_fmnist", image=png, rollout=True),
                         timeout=60)
    assert list(ok.rollout.shape) == [4, 4]
    for request in (v1.ExplainRequest(model_name="dgvit_fmnist", image=png, rollout=True,
                                      attention_layers=[0, 1, 2, 3]),):
        with pytest.raises(grpc.RpcError) as err:
            v1_stub.Explain(request, timeout=60)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"cap of {CAP}" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        infer(kv, stub, "dgvit_fmnist", images[:1],
              {"explain": "rollout", "explain_attention_layers": "0,1,2,3"})
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # One KServe call holds every example's explanation until the last is done, so the cap
    # bounds them together: one rollout fits, two (52,080 bytes) do not.
    assert infer(kv, stub, "dgvit_fmnist", images[:1], {"explain": "rollout"}).outputs
    with pytest.raises(grpc.RpcError) as err:
        infer(kv, stub, "dgvit_fmnist", images[:2], {"explain": "rollout"})
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "2 examples" in err.value.details() and f"cap of {CAP}" in err.value.details()
    pred = v1_stub.Predict(v1.PredictRequest(model_name="dgvit_fmnist", image=png), timeout=60)
    assert pred.classes[0].probability > 0


def scrape(server, name, model, layer):
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                  timeout=10).read().decode()
    labels = r'\{(?=[^}]*layer="%d")(?=[^}]*model="%s")[^}]*\}' % (layer, model)
    values = {}
    for suffix in ("count", "sum"):
        m = re.search(r"^%s_%s%s (\S+)$" % (name, suffix, labels), text, re.M)
        values[suffix] = float(m.group(1)) if m else 0.0
    return values


def test_gate_statistics_of_served_predictions(server, stubs, images):
    kv, stub, _, _ = stubs
    before = [scrape(server, "gatescope_gate_mean", "dgvit_fmnist", l) for l in range(4)]
    for i in range(0, N, 4):
        infer(kv, stub, "dgvit_fmnist", images[i:i + 4], {})
    with torch.no_grad():
        gate_mean = load("dgvit_fmnist")(model_input(images))["gate_mean"]  # [N, layers]
    for layer in range(4):
        after = scrape(server, "gatescope_gate_mean", "dgvit_fmnist", layer)
        assert after["count"] - before[layer]["count"] == N
        assert abs((after["sum"] - before[layer]["sum"]) - float(gate_mean[:, layer].sum())) < 1e-4


def test_dar_resonance_maps_match_the_reference(stubs, images):
    _, _, v1, v1_stub = stubs
    png = encode_gray_png(images[1])
    resp = v1_stub.Explain(v1.ExplainRequest(model_name="darvit_fmnist", image=png, rollout=True,
                                             resonance=True, attention_layers=[2]), timeout=60)
    with torch.no_grad():
        maps = load("darvit_fmnist").explain(model_input(images[1:2]))
    assert len(resp.resonance) == 4
    for layer, r in enumerate(resp.resonance):
        want = maps["resonance"][layer][0][:, 0, 1:].reshape(4, 4, 4).numpy()
        assert np.abs(as_array(r) - want).max() <= 1e-5
    want_vig = torch.stack([v[0] for v in maps["vigilance"]]).numpy()
    assert as_array(resp.vigilance).shape == (4, 4)
    assert np.abs(as_array(resp.vigilance) - want_vig).max() <= 1e-6
    assert np.abs(as_array(resp.attention_resonance[0]) - maps["resonance"][2][0].numpy()).max() <= 1e-5
    want_rollout = ref.rollout([m[0] for m in maps["attention"]])[0, 1:].reshape(4, 4).numpy()
    assert np.abs(as_array(resp.rollout) - want_rollout).max() <= 1e-5
    # Gates are an M-DGSA feature: a DAR-ViT has none.
    with pytest.raises(grpc.RpcError) as err:
        v1_stub.Explain(v1.ExplainRequest(model_name="darvit_fmnist", image=png, gates=True),
                        timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_vigilance_statistics_of_served_predictions(server, stubs, images):
    kv, stub, _, _ = stubs
    before = scrape(server, "gatescope_vigilance_crossing", "darvit_fmnist", 3)
    infer(kv, stub, "darvit_fmnist", images[:6], {})
    with torch.no_grad():
        want = load("darvit_fmnist")(model_input(images[:6]))["vigilance_mean"][:, 3]
    after = scrape(server, "gatescope_vigilance_crossing", "darvit_fmnist", 3)
    assert after["count"] - before["count"] == 6
    assert abs((after["sum"] - before["sum"]) - float(want.sum())) < 1e-4


def test_client_resonance_panel_and_comparison(server, tmp_path, images):
    import json
    src = tmp_path / "in.png"
    src.write_bytes(encode_gray_png(images[2]))
    out = tmp_path / "out"
    res = server.client("explain", "--model", "darvit_fmnist", "--rollout", "--resonance",
                        "--out", str(out), str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    assert np.load(out / "in.png.resonance.npy").shape == (4, 4, 4, 4)
    assert np.load(out / "in.png.vigilance.npy").shape == (4, 4)
    models = ["dgvit_fmnist", "diffvit_fmnist", "vit_fmnist", "darvit_fmnist"]
    res = server.client("explain", "--compare", ",".join(models), "--out", str(out),
                        "--overwrite", str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    line = json.loads(res.stdout.splitlines()[0])
    assert [m["model"] for m in line["models"]] == models
    from test_explain import png_size
    # 144 px tiles under an 18 px title, over a 24 px colour bar and a 30 px caption.
    assert png_size(open(line["compare"], "rb").read()) == (18 + 144 + 24 + 30, 5 * 144)
