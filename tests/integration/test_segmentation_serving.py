"""Segmentation served end to end with the shipped PVT-GDLA (Colin27 MRI): masks equal the
Python model's argmax on held-out slices (at their own size, and at other sizes), explain
maps equal the Python reference, bad inputs get INVALID_ARGUMENT, the client writes PNGs."""
import concurrent.futures
import importlib
import json
import sys

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, api_stubs, generate_python_stubs, serve_shipped
from gatescope import ops
from gatescope.data import colin27
from gatescope.data.png import decode_png, encode_gray_png
from gatescope.segmentation import preprocess, segment

MODEL = "pvt_gdla_colin27"
BASELINE = "pvt_la_colin27"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # only the segmentation models: a quicker start
    yield from serve_shipped(tmp_path_factory, (MODEL, BASELINE))


@pytest.fixture(scope="module")
def v1(server, tmp_path_factory):
    for _, _, messages, stub in api_stubs(server, tmp_path_factory):
        yield messages, stub


@pytest.fixture(scope="module")
def held_out():
    return colin27.load_slices()["test"]


def load(name):
    ops.load()
    extra = {"gatescope.json": ""}
    model = torch.jit.load(str(REPO / "model_repository" / name / "1" / "model.pt"),
                           _extra_files=extra)
    return model, json.loads(extra["gatescope.json"])


def reference_mask(name, image: np.ndarray) -> np.ndarray:
    model, meta = load(name)
    x = torch.from_numpy(image).view(1, 1, *image.shape)
    with torch.no_grad():
        return segment(lambda t: model(t)["logits"], x,
                       tuple(meta["input"]["shape"][1:]))[0].numpy()


def tensor_input(pb, image: np.ndarray, dtype="UINT8"):
    return pb.Tensor(dtype=getattr(pb.Tensor, dtype), shape=list(image.shape),
                     data=image.tobytes())


def mask_of(seg) -> np.ndarray:
    assert seg.mask.dtype == 1  # UINT8
    return np.frombuffer(seg.mask.data, np.uint8).reshape(tuple(seg.mask.shape))


def as_array(t):
    return np.frombuffer(t.data, dtype="<f4").reshape(tuple(t.shape))


def test_masks_equal_python_argmax_on_held_out_slices(v1, held_out):
    """All held-out slices, sent concurrently (so the server batches them), as raw pixels
    at their own 217 x 181 size."""
    pb, stub = v1
    images = held_out["images"]

    def call(i):
        return stub.Predict(pb.PredictRequest(model_name=MODEL,
                                              tensor=tensor_input(pb, images[i])), timeout=120)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(call, range(len(images))))
    model, meta = load(MODEL)
    with torch.no_grad():
        ref = segment(lambda t: model(t)["logits"], torch.from_numpy(images).unsqueeze(1),
                      tuple(meta["input"]["shape"][1:])).numpy()
    mismatched = 0
    for i, reply in enumerate(replies):
        assert not reply.classes
        mask = mask_of(reply.segmentation)
        assert mask.shape == (217, 181)
        mismatched += int((mask != ref[i]).sum())
        counts = np.bincount(mask.ravel(), minlength=5)
        assert list(reply.segmentation.class_pixels) == counts.tolist()
    # Batched and single-image convolutions may round differently; only exact ties flip.
    assert mismatched <= 1e-5 * ref.size, mismatched
    # The served masks are a real segmentation: Dice of the brain vs the labels.
    served = np.stack([mask_of(r.segmentation) for r in replies])
    truth = held_out["labels"]
    brain = 2 * ((served > 0) & (truth > 0)).sum() / ((served > 0).sum() + (truth > 0).sum())
    assert brain > 0.95


def test_png_probabilities_and_other_input_sizes(v1, held_out):
    pb, stub = v1
    image = held_out["images"][12]
    reply = stub.Predict(pb.PredictRequest(model_name=MODEL, image=encode_gray_png(image),
                                           mask_png=True, class_probabilities=True))
    seg = reply.segmentation
    mask = mask_of(seg)
    assert (decode_png(seg.mask_png) == mask).all()
    prob = as_array(seg.probabilities)
    assert prob.shape == (5, 217, 181)
    assert np.allclose(prob.sum(axis=0), 1.0, atol=1e-5)
    assert (prob.argmax(axis=0) == mask).mean() > 0.9999
    assert (mask == reference_mask(MODEL, image)).mean() > 0.9999
    # Non-square sizes other than the model's: the mask comes back at the input's size.
    for h, w in ((150, 260), (300, 97)):
        rows = np.arange(h) * image.shape[0] // h
        cols = np.arange(w) * image.shape[1] // w
        resized = np.ascontiguousarray(image[rows][:, cols])
        got = mask_of(stub.Predict(pb.PredictRequest(
            model_name=MODEL, tensor=tensor_input(pb, resized))).segmentation)
        assert got.shape == (h, w)
        assert (got == reference_mask(MODEL, resized)).mean() > 0.9999


def test_explain_gates_and_query_attention_equal_python(v1, held_out):
    pb, stub = v1
    image = held_out["images"][20]
    y, x = 120, 60
    reply = stub.Explain(pb.ExplainRequest(model_name=MODEL, tensor=tensor_input(pb, image),
                                           gates=True, query_pixel=pb.QueryPixel(y=y, x=x)))
    model, meta = load(MODEL)
    xin = preprocess(torch.from_numpy(image).view(1, 1, 217, 181), (224, 192))
    with torch.no_grad():
        state = model.explain_begin(xin, [(y + 0.5) / 217, (x + 0.5) / 181])
        for stage, (grid) in enumerate([(14, 12), (28, 24), (56, 48)]):
            state, maps = model.explain_layer(state, stage)
            gate, attn = as_array(reply.gates[stage]), as_array(reply.query_attention[stage])
            assert gate.shape == grid and attn.shape == grid
            assert np.abs(gate - maps["gate"][0].numpy()).max() < 1e-5
            assert np.abs(attn - maps["attention"][0].numpy()).max() < 1e-5
            assert 0.0 < gate.min() and gate.max() < 1.0   # sigmoid gate values
    assert len(reply.gates) == 3 and len(reply.query_attention) == 3
    assert (mask_of(reply.segmentation) == reference_mask(MODEL, image)).mean() > 0.9999


def test_bad_inputs_are_invalid_argument(v1, held_out):
    pb, stub = v1
    image = held_out["images"][0]
    three = np.stack([image] * 3)
    bad_predicts = [
        pb.PredictRequest(model_name=MODEL, tensor=tensor_input(pb, three)),      # 3 channels
        pb.PredictRequest(model_name=MODEL, tensor=pb.Tensor(
            dtype=pb.Tensor.UINT8, shape=[1, 9000, 4], data=bytes(36000))),       # too tall
        pb.PredictRequest(model_name=MODEL, tensor=pb.Tensor(
            dtype=pb.Tensor.UINT8, shape=[217, 181], data=bytes(100))),           # short data
        pb.PredictRequest(model_name=MODEL, tensor=pb.Tensor(
            dtype=pb.Tensor.UINT8, shape=[0, 181], data=b"")),                    # empty
        pb.PredictRequest(model_name=MODEL, image=b"not an image"),
    ]
    for req in bad_predicts:
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(req)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    bad_explains = [
        dict(model_name=MODEL, rollout=True),
        dict(model_name=MODEL, query_pixel=pb.QueryPixel(y=217, x=0)),
        dict(model_name=MODEL, query_pixel=pb.QueryPixel(y=0, x=-1)),
        dict(model_name=BASELINE, gates=True),                # linear attention has no gate
    ]
    for fields in bad_explains:
        with pytest.raises(grpc.RpcError) as e:
            stub.Explain(pb.ExplainRequest(tensor=tensor_input(pb, image), **fields))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    ok = stub.Predict(pb.PredictRequest(model_name=MODEL, tensor=tensor_input(pb, image)))
    assert mask_of(ok.segmentation).shape == (217, 181)


def test_baseline_serves_query_attention(v1, held_out):
    pb, stub = v1
    reply = stub.Explain(pb.ExplainRequest(model_name=BASELINE,
                                           tensor=tensor_input(pb, held_out["images"][5]),
                                           query_pixel=pb.QueryPixel(y=100, x=90)))
    assert not reply.gates and len(reply.query_attention) == 3
    # Linear-attention weights over all tokens are positive and sum to 1.
    for t in reply.query_attention:
        a = as_array(t)
        assert a.min() > 0 and abs(a.sum() - 1.0) < 1e-4


def test_client_writes_overlay_and_map_pngs(server, held_out, tmp_path):
    png = tmp_path / "slice.png"
    png.write_bytes(encode_gray_png(held_out["images"][15]))
    out = tmp_path / "out"
    r = server.client("predict", "--model", MODEL, "--out", str(out), str(png))
    assert r.returncode == 0, r.stderr
    assert "class_pixels" in r.stdout
    r = server.client("explain", "--model", MODEL, "--gates", "--query", "100,90",
                      "--overwrite", "--out", str(out), str(png))
    assert r.returncode == 0, r.stderr
    pngs = sorted(p.name for p in out.iterdir() if p.suffix == ".png")
    assert pngs, list(out.iterdir())
    for p in out.iterdir():
        if p.suffix == ".png":
            img = decode_png(p.read_bytes())
            assert img.shape[0] >= 217 and img.shape[1] >= 181, (p.name, img.shape)


def test_kserve_returns_masks_at_the_input_size(server, held_out, tmp_path_factory):
    out = tmp_path_factory.mktemp("kv_stubs")
    generate_python_stubs(out, "inference/model_config.proto", "inference/grpc_service.proto")
    sys.path.insert(0, str(out))
    kv = importlib.import_module("inference.grpc_service_pb2")
    kv_grpc = importlib.import_module("inference.grpc_service_pb2_grpc")
    images = held_out["images"][3:5]
    req = kv.ModelInferRequest(model_name=MODEL)
    req.inputs.add(name="input", datatype="UINT8", shape=[2, 1, 217, 181])
    req.raw_input_contents.append(images.tobytes())
    req.outputs.add(name="mask")
    with grpc.insecure_channel(server.address) as channel:
        resp = kv_grpc.GRPCInferenceServiceStub(channel).ModelInfer(req, timeout=120)
    assert [o.name for o in resp.outputs] == ["mask"]
    assert list(resp.outputs[0].shape) == [2, 217, 181]
    masks = np.frombuffer(resp.raw_output_contents[0], np.uint8).reshape(2, 217, 181)
    for got, image in zip(masks, images):
        assert (got == reference_mask(MODEL, image)).mean() > 0.9999
