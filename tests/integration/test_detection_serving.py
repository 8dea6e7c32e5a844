"""Detection served: detections from the server (gatescope.v1) equal the Python model's on
held-out generated scenes and find the scenes' objects; threshold, max_detections and
batching behave; Explain's sampling points, attention weights and PLuG gates of each
detection equal the Python reference through the same model contract; malformed requests
are INVALID_ARGUMENT; the client draws boxes and sampling points."""
import concurrent.futures
import json
import pathlib

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, api_stubs, serve_shipped
from gatescope import detection
from gatescope.data import detection_scenes as ds
from gatescope.data.png import decode_png, encode_gray_png
from gatescope.detection_loss import box_iou
from gatescope.networks.deformable_detr import DeformableDETR
from gatescope.served_detector import ServedDetector

PLUG, PLAIN, CLASSIFIER = "plug_detr_scenes", "detr_scenes", "vit_fmnist"
CKPT = {PLUG: "plug_detr_scenes.ckpt", PLAIN: "detr_scenes.ckpt"}
N_SCENES = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, (PLUG, PLAIN, CLASSIFIER))


@pytest.fixture(scope="module")
def stubs(server, tmp_path_factory):
    yield from api_stubs(server, tmp_path_factory)


@pytest.fixture(scope="module")
def scenes():
    if not ds.mnist_available():
        pytest.fail("MNIST is missing: run scripts/fetch_mnist.sh (scripts/test.sh does)")
    # The training canvas sizes (padded to 128 inside the model) and larger ones (not padded).
    return (ds.make_scenes("heldout", N_SCENES - 4, seed=1234)
            + ds.make_scenes("heldout", 4, seed=1234, start=N_SCENES, size_range=(129, 200)))


@pytest.fixture(scope="module")
def reference():
    """The eager Python models (no fused ops, no TorchScript) from the training checkpoints."""
    models = {}
    for name, ckpt in CKPT.items():
        state = torch.load(str(REPO / "models" / "checkpoints" / ckpt), map_location="cpu")
        net = DeformableDETR(**state["config"])
        net.load_state_dict(state["model_state_dict"])
        models[name] = ServedDetector(net.eval())
    return models


def as_array(t):
    return np.frombuffer(t.data, dtype="<f4").reshape(tuple(t.shape))


def boxes_of(resp):
    return np.array([[d.x1, d.y1, d.x2, d.y2] for d in resp.detections], np.float32).reshape(-1, 4)


def assert_same_detections(got, want, threshold):
    """Server detections `got` equal the Python ones `want`; pairs whose score lies within
    1e-4 of the threshold may be on either side of it (float rounding)."""
    got_by_key = {(d.query, d.label_index): d for d in got}
    keys = list(zip(want["queries"].tolist(), want["labels"].tolist()))
    for i, key in enumerate(keys):
        score = float(want["scores"][i])
        if key not in got_by_key:
            assert score - threshold < 1e-4, (key, score)
            continue
        d = got_by_key[key]
        assert abs(d.score - score) < 1e-4, key
        np.testing.assert_allclose([d.x1, d.y1, d.x2, d.y2], want["boxes"][i].numpy(), atol=0.02)
    for d in got:
        assert (d.query, d.label_index) in keys or d.score - threshold < 1e-4
    scores = [d.score for d in got]
    assert scores == sorted(scores, reverse=True)


def test_detections_equal_the_python_model_and_find_the_objects(stubs, scenes, reference):
    _, _, v1, stub = stubs
    for name in (PLUG, PLAIN):
        found, objects = 0, 0
        for image, gt_boxes, gt_labels in scenes:
            resp = stub.Predict(v1.PredictRequest(model_name=name, image=encode_gray_png(image)),
                                timeout=60)
            want = detection.detect(reference[name], image)
            assert_same_detections(resp.detections, want, detection.DEFAULT_SCORE_THRESHOLD)
            for d in resp.detections:
                assert d.label == ds.LABELS[d.label_index]
            if len(resp.detections):
                iou = box_iou(torch.from_numpy(gt_boxes), torch.from_numpy(boxes_of(resp)))[0]
                labels = np.array([d.label_index for d in resp.detections])
                hit = (iou.numpy() >= 0.5) & (gt_labels[:, None] == labels[None, :])
                found += int(hit.any(1).sum())
            objects += len(gt_labels)
        # The served boxes are in the scenes' pixel coordinates: most objects are found.
        assert found / objects >= 0.45, (name, found, objects)


def test_threshold_max_detections_and_tensor_input(stubs, scenes, reference):
    _, _, v1, stub = stubs
    image = scenes[3][0]
    resp = stub.Predict(v1.PredictRequest(model_name=PLUG, image=encode_gray_png(image),
                                          score_threshold=0.0, max_detections=7), timeout=60)
    want = detection.detect(reference[PLUG], image, 0.0, 7)
    assert len(resp.detections) == 7
    assert_same_detections(resp.detections, want, 0.0)
    tensor = v1.Tensor(dtype=v1.Tensor.UINT8, shape=list(image.shape), data=image.tobytes())
    same = stub.Predict(v1.PredictRequest(model_name=PLUG, tensor=tensor, score_threshold=0.0,
                                          max_detections=7), timeout=60)
    assert [(d.query, d.label_index) for d in same.detections] == \
        [(d.query, d.label_index) for d in resp.detections]
    np.testing.assert_allclose(boxes_of(same), boxes_of(resp), atol=1e-4)
    high = stub.Predict(v1.PredictRequest(model_name=PLUG, image=encode_gray_png(image),
                                          score_threshold=0.9), timeout=60)
    assert all(d.score > 0.9 for d in high.detections)
    assert len(high.detections) == int((want["scores"] > 0.9).sum())


def test_concurrent_requests_of_one_size_each_get_their_own_detections(stubs, scenes):
    _, _, v1, stub = stubs
    image = scenes[0][0]
    variants = [image, image[:, ::-1], image[::-1], image[::-1, ::-1]]
    requests = [v1.PredictRequest(model_name=PLUG, image=encode_gray_png(np.ascontiguousarray(v)),
                                  score_threshold=0.1) for v in variants] * 2
    alone = [stub.Predict(r, timeout=60) for r in requests[:4]]
    assert len({tuple(d.label_index for d in a.detections) for a in alone} |
               {tuple(np.round(boxes_of(a)).ravel()) for a in alone}) > 2  # they differ
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda r: stub.Predict(r, timeout=60), requests))
    for i, resp in enumerate(together):
        want = alone[i % 4]
        assert [(d.query, d.label_index) for d in resp.detections] == \
            [(d.query, d.label_index) for d in want.detections], i
        np.testing.assert_allclose(boxes_of(resp), boxes_of(want), atol=1e-3)


def test_explain_maps_equal_the_reference(stubs, scenes, reference):
    _, _, v1, stub = stubs
    for name, image in ((PLUG, scenes[1][0]), (PLUG, scenes[-1][0]), (PLAIN, scenes[1][0])):
        plug = name == PLUG
        resp = stub.Explain(v1.ExplainRequest(model_name=name, image=encode_gray_png(image),
                                              plug_gates=plug, max_detections=5), timeout=60)
        want = detection.explain_detections(reference[name], image, max_detections=5)
        assert_same_detections(resp.detections, want, detection.DEFAULT_SCORE_THRESHOLD)
        assert len(resp.detection_maps) == len(resp.detections) >= 1
        keys = list(zip(want["queries"].tolist(), want["labels"].tolist()))
        for maps, d in zip(resp.detection_maps, resp.detections):
            i = keys.index((d.query, d.label_index))
            points = as_array(maps.sampling_points)
            assert points.shape == (2, 8, 4, 4, 2)
            np.testing.assert_allclose(points, want["sampling_points"][i].numpy(), atol=0.02)
            weights = as_array(maps.attention_weights)
            np.testing.assert_allclose(weights, want["attention_weights"][i].numpy(), atol=1e-4)
            np.testing.assert_allclose(weights.sum((-1, -2)), 1.0, atol=1e-4)
            if plug:
                np.testing.assert_allclose(as_array(maps.plug_gate),
                                           want["plug_gate"][i].numpy(), atol=1e-4)
            else:
                assert len(maps.plug_gate.shape) == 0
        if plug:
            h, w = image.shape
            assert len(resp.encoder_plug_gates) == 2 * 4
            for k, (got, ref) in enumerate(zip(resp.encoder_plug_gates, want["encoder_plug_gates"])):
                stride = 8 << (k % 4)
                assert tuple(got.shape)[:2] == (8, 4)
                if h >= 128 and w >= 128:  # not padded: the grid covers exactly the image
                    assert tuple(got.shape)[2:] == (-(-h // stride), -(-w // stride))
                np.testing.assert_allclose(as_array(got), ref.numpy(), atol=1e-4)
            # The gates vary over heads and levels: they are the model's, not constants.
            g = as_array(resp.detection_maps[0].plug_gate)
            assert g.std() > 1e-3
        else:
            assert len(resp.encoder_plug_gates) == 0


def invalid(call, request):
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    return err.value.details()


def test_malformed_requests_are_invalid_argument(stubs, scenes):
    _, _, v1, stub = stubs
    png = encode_gray_png(scenes[0][0])
    for kwargs in ({"score_threshold": 1.0}, {"score_threshold": -0.1},
                   {"score_threshold": float("nan")}, {"max_detections": -1}):
        assert "score_threshold" in invalid(stub.Predict, v1.PredictRequest(
            model_name=PLUG, image=png, **kwargs)) or "max_detections" in kwargs
        invalid(stub.Explain, v1.ExplainRequest(model_name=PLUG, image=png, **kwargs))
    small = np.zeros((16, 40), np.uint8)
    assert "32" in invalid(stub.Predict, v1.PredictRequest(model_name=PLUG,
                                                           image=encode_gray_png(small)))
    big = np.zeros((1100, 1000), np.uint8)
    assert "1048576" in invalid(stub.Predict, v1.PredictRequest(
        model_name=PLUG, image=encode_gray_png(big)))
    rgb = v1.Tensor(dtype=v1.Tensor.UINT8, shape=[3, 64, 64], data=bytes(3 * 64 * 64))
    invalid(stub.Predict, v1.PredictRequest(model_name=PLUG, tensor=rgb))
    short = v1.Tensor(dtype=v1.Tensor.UINT8, shape=[64, 64], data=bytes(100))
    invalid(stub.Predict, v1.PredictRequest(model_name=PLUG, tensor=short))
    invalid(stub.Predict, v1.PredictRequest(model_name=PLUG, image=b"not an image"))
    for kwargs in ({"rollout": True}, {"gates": True}, {"attention_layers": [0]},
                   {"query_pixel": v1.QueryPixel(y=1, x=1)}, {"heatmap_png": True}):
        invalid(stub.Explain, v1.ExplainRequest(model_name=PLUG, image=png, **kwargs))
    assert "PLuG" in invalid(stub.Explain, v1.ExplainRequest(model_name=PLAIN, image=png,
                                                             plug_gates=True))
    fmnist = encode_gray_png(np.zeros((28, 28), np.uint8))
    invalid(stub.Predict, v1.PredictRequest(model_name=CLASSIFIER, image=fmnist,
                                            score_threshold=0.5))
    invalid(stub.Explain, v1.ExplainRequest(model_name=CLASSIFIER, image=fmnist,
                                            max_detections=3))
    # The server is still serving.
    assert stub.Predict(v1.PredictRequest(model_name=PLUG, image=png), timeout=60).model_name == PLUG


def test_client_draws_boxes_and_sampling_points(server, stubs, scenes, tmp_path):
    _, _, v1, stub = stubs
    image = scenes[2][0]
    path = tmp_path / "scene.png"
    path.write_bytes(encode_gray_png(image))
    out = tmp_path / "out"
    res = server.client("predict", "--model", PLUG, "--out", str(out), "--max-detections", "4",
                        str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    line = json.loads(res.stdout)
    want = stub.Predict(v1.PredictRequest(model_name=PLUG, image=encode_gray_png(image),
                                          max_detections=4), timeout=60)
    assert [d["label"] for d in line["detections"]] == [d.label for d in want.detections]
    np.testing.assert_allclose([d["box"] for d in line["detections"]], boxes_of(want), atol=1e-3)
    boxes = decode_png(pathlib.Path(line["boxes"]).read_bytes())
    scale = -(-384 // image.shape[0])
    # The enlarged input under a 20 px title strip.
    assert boxes.shape[:2] == (20 + image.shape[0] * scale, image.shape[1] * scale)
    boxes = boxes[20:]
    # The picture differs from the enlarged input where boxes are drawn.
    plain = np.repeat(np.repeat(image, scale, 0), scale, 1)
    assert (np.abs(boxes[..., 1].astype(int) - plain) > 40).mean() > 0.005

    res = server.client("explain", "--model", PLUG, "--plug-gates", "--out", str(out / "ex"),
                        str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    line = json.loads(res.stdout)
    ex = stub.Explain(v1.ExplainRequest(model_name=PLUG, image=encode_gray_png(image),
                                        plug_gates=True), timeout=60)
    assert len(line["detections"]) == len(ex.detections) >= 1
    # Title, the enlarged input with a quarter margin above and below, and the footer
    # counting the points outside the image.
    h = image.shape[0] * scale
    assert decode_png(pathlib.Path(line["sampling_points"]).read_bytes()).shape[0] == \
        20 + h + 2 * (h // 4) + 20
    # The count the footer states, recomputed from the maps (last decoder layer).
    locs = [as_array(m.sampling_points)[-1].reshape(-1, 2) for m in ex.detection_maps]
    outside = sum(int(((l[:, 0] < 0) | (l[:, 1] < 0) | (l[:, 0] >= image.shape[1]) |
                       (l[:, 1] >= image.shape[0])).sum()) for l in locs)
    assert line["points_outside"] == outside and line["points"] == sum(len(l) for l in locs)
    assert decode_png(pathlib.Path(line["encoder_plug_gates"]).read_bytes()).shape[0] > 112
    points = np.load(out / "ex" / "detection0.sampling_points.npy")
    np.testing.assert_allclose(points, as_array(ex.detection_maps[0].sampling_points))
    gate = np.load(out / "ex" / "detection0.plug_gate.npy")
    np.testing.assert_allclose(gate, as_array(ex.detection_maps[0].plug_gate))
    assert len([p for p in line["npy"] if "encoder_plug_gate." in p]) == 8
    # No detection above the threshold: still the encoder gate maps, and no error.
    res = server.client("explain", "--model", PLUG, "--plug-gates", "--score-threshold",
                        "0.999", "--out", str(out / "none"), str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    line = json.loads(res.stdout)
    assert line["detections"] == [] and pathlib.Path(line["encoder_plug_gates"]).exists()
    res = server.client("predict", "--model", PLUG, "--score-threshold", "high", str(path))
    assert res.returncode == 2 and "--score-threshold" in res.stderr and res.stdout == ""


def test_kserve_returns_the_same_detections(stubs, scenes):
    kv, kstub, v1, stub = stubs
    same = [s[0] for s in scenes if s[0].shape == scenes[0][0].shape][:2]
    if len(same) < 2:
        same = [scenes[0][0], scenes[0][0][:, ::-1].copy()]
    h, w = same[0].shape
    req = kv.ModelInferRequest(model_name=PLUG)
    req.inputs.add(name="input", datatype="UINT8", shape=[2, 1, h, w])
    req.raw_input_contents.append(np.stack(same).tobytes())
    req.parameters["score_threshold"].double_param = 0.2
    req.parameters["max_detections"].int64_param = 6
    for name in ("detection_boxes", "detection_scores", "detection_classes", "num_detections"):
        req.outputs.add(name=name)
    resp = kstub.ModelInfer(req, timeout=60)
    out = {o.name: (o, raw) for o, raw in zip(resp.outputs, resp.raw_output_contents)}
    assert list(out["detection_boxes"][0].shape) == [2, 6, 4]
    assert out["detection_classes"][0].datatype == "INT64"
    boxes = np.frombuffer(out["detection_boxes"][1], "<f4").reshape(2, 6, 4)
    scores = np.frombuffer(out["detection_scores"][1], "<f4").reshape(2, 6)
    classes = np.frombuffer(out["detection_classes"][1], "<i8").reshape(2, 6)
    counts = np.frombuffer(out["num_detections"][1], "<i8")
    for i, image in enumerate(same):
        want = stub.Predict(v1.PredictRequest(model_name=PLUG, image=encode_gray_png(image),
                                              score_threshold=0.2, max_detections=6), timeout=60)
        n = len(want.detections)
        assert counts[i] == n
        assert classes[i, :n].tolist() == [d.label_index for d in want.detections]
        np.testing.assert_allclose(boxes[i, :n], boxes_of(want), atol=1e-3)
        np.testing.assert_allclose(scores[i, :n], [d.score for d in want.detections], atol=1e-5)
        assert (classes[i, n:] == -1).all() and (scores[i, n:] == 0).all()
    meta = kstub.ModelMetadata(kv.ModelMetadataRequest(name=PLUG), timeout=10)
    declared = {o.name: list(o.shape) for o in meta.outputs}
    assert declared["boxes"] == [-1, 50, 4] and declared["logits"] == [-1, 50, 20]
    assert declared["detection_boxes"] == [-1, -1, 4] and declared["num_detections"] == [-1]
    for params, model in (({"explain": "plug_gates"}, PLUG), ({"max_detections": 3}, CLASSIFIER)):
        bad = kv.ModelInferRequest(model_name=model)
        size = (h, w) if model == PLUG else (28, 28)
        bad.inputs.add(name="input", datatype="UINT8", shape=[1, 1, *size])
        bad.raw_input_contents.append(bytes(size[0] * size[1]))
        for k, v in params.items():
            if isinstance(v, str):
                bad.parameters[k].string_param = v
            else:
                bad.parameters[k].int64_param = v
        with pytest.raises(grpc.RpcError) as err:
            kstub.ModelInfer(bad, timeout=60)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
