"""The detector export (models/export_detector.py): the TorchScript it writes equals the
eager model at two input sizes (one padded to the training canvas in the graph, one larger
and not padded), for forward and the layer-by-layer explain contract; its metadata
describes the model; the shipped detectors' cards match their held-out AP."""
import json
import pathlib
import re

import pytest
import torch

from gatescope.export import detector as export_detector
from gatescope.served_detector import ServedDetector
from test_deformable_detr import model, perturb

REPO = pathlib.Path(__file__).resolve().parents[2] / "model_repository"
LABELS = [f"class {i}" for i in range(20)]


def fake_checkpoint(tmp_path, plug):
    net = perturb(model(plug=plug))
    path = tmp_path / f"detr_{plug}.ckpt"
    torch.save({"model_state_dict": net.state_dict(),
                "config": {"num_classes": 20, "plug": plug, "d_ffn": 128, "num_queries": 30},
                "labels": LABELS, "history": [], "recipe": {}}, path)
    return net, path


def run_contract(served, x):
    """(forward outputs, per-layer maps, explain_end outputs) through the served contract."""
    with torch.no_grad():
        out = served(x)
        state = served.explain_begin(x)
        layers = []
        for layer in range(4):
            state, maps = served.explain_layer(state, layer)
            layers.append(maps)
        end = served.explain_end(state)
    return out, layers, end


@pytest.mark.parametrize("plug", [False, True])
def test_exported_model_equals_eager_at_two_sizes(ops, tmp_path, plug):
    net, ckpt = fake_checkpoint(tmp_path, plug)
    path, meta, _, _ = export_detector.export(ckpt, "det", tmp_path / "repo")
    extra = {"gatescope.json": ""}
    loaded = torch.jit.load(str(path), _extra_files=extra)
    assert json.loads(extra["gatescope.json"]) == meta
    assert meta["task"] == "object_detection" and meta["labels"] == LABELS
    assert meta["input"]["native_size"] and meta["layers"] == 4
    assert meta["detection"]["queries"] == 30
    strides = meta["detection"]["level_strides"]
    assert strides == net.level_strides == [8, 16, 32, 64]
    assert meta["maps"] == (["sampling_points", "plug_gate"] if plug else ["sampling_points"])
    eager = ServedDetector(net.eval(), export_detector.NOMINAL_SIZE)  # no fused ops
    g = torch.Generator().manual_seed(3)
    for h, w in ((96, 112), (160, 144)):
        x = torch.randn(2, 1, h, w, generator=g)
        (want, want_maps, want_end) = run_contract(eager, x)
        (got, got_maps, got_end) = run_contract(loaded, x)
        for k in ("logits", "boxes"):
            assert got[k].shape == (2, 30, 20 if k == "logits" else 4)
            assert torch.allclose(got[k], want[k], atol=1e-5), (h, w, k)
            assert torch.allclose(got_end[k], want[k], atol=1e-5), (h, w, k)
        assert torch.allclose(got_end["reference_points"], want_end["reference_points"])
        for layer, (a, b) in enumerate(zip(want_maps, got_maps)):
            assert sorted(a) == sorted(b)
            for k in a:
                assert torch.allclose(a[k], b[k], atol=1e-5), (h, w, layer, k)
        if plug:
            # encoder gate maps cover the image's own grid at each level: the metadata's
            # strides are the levels' (what the server bounds explanations with)
            for k, stride in enumerate(strides):
                assert got_maps[0][f"plug_gate_level{k}"].shape == \
                    (2, 8, 4, -(-h // stride), -(-w // stride))
        else:
            assert got_maps[0] == {}
        assert got_maps[2]["sampling_locations"].shape == (2, 30, 8, 4, 4, 2)
        # Independently of ServedDetector: the network on the canvas padded by hand, its
        # level-normalised points scaled by each level's pixel extent (cells x stride).
        hc, wc = max(h, 128), max(w, 128)
        padded = torch.zeros(2, 1, hc, wc)
        padded[:, :, :h, :w] = x
        mask = torch.ones(2, hc, wc, dtype=torch.bool)
        mask[:, :h, :w] = False
        with torch.no_grad():
            raw = net.explain(padded, mask)
        # level_strides as the proto defines them: ceil(H / s) x ceil(W / s) cells of the
        # (padded) canvas per level
        assert raw["spatial_shapes"][0].tolist() == [[-(-hc // s), -(-wc // s)]
                                                     for s in strides]
        extent = torch.tensor([[cw * st / w, ch * st / h] for (ch, cw), st in
                               zip(raw["spatial_shapes"][0].tolist(), strides)])
        for layer in range(2):
            want_loc = raw["decoder_sampling_locations"][layer] * extent.view(1, 1, 1, 4, 1, 2)
            assert torch.allclose(got_maps[2 + layer]["sampling_locations"], want_loc,
                                  atol=1e-5), (h, w, layer)
            assert torch.allclose(got_maps[2 + layer]["attention_weights"],
                                  raw["decoder_attention_weights"][layer], atol=1e-5)
        assert torch.allclose(got["logits"], raw["logits"][0], atol=1e-5)


@pytest.mark.parametrize("name,plug", [("plug_detr_scenes", True), ("detr_scenes", False)])
def test_shipped_detector_ap_matches_model_card(ops, name, plug):
    from gatescope.data import detection_scenes as ds
    if not ds.mnist_available():
        pytest.fail("MNIST is missing: run scripts/fetch_mnist.sh (scripts/test.sh does)")
    extra = {"gatescope.json": "", "training.json": ""}
    loaded = torch.jit.load(str(REPO / name / "1" / "model.pt"), _extra_files=extra)
    meta, record = json.loads(extra["gatescope.json"]), json.loads(extra["training.json"])
    assert meta["labels"] == ds.LABELS and (meta["arch"] == "plug_deformable_detr") == plug
    assert meta["detection"]["level_strides"] == [8, 16, 32, 64]
    held = record["held_out"]
    scenes = ds.make_scenes(held["split"], held["count"], seed=held["seed"])
    ap = export_detector.served_ap(loaded, scenes)
    row = next(line for line in (REPO / name / "README.md").read_text().splitlines()
               if re.match(r"\| (PLuG )?Deformable DETR", line))
    claimed = [float(v) for v in row.split("|")[6:9]]
    assert [100 * ap[k] for k in ("AP", "AP50", "AP75")] == pytest.approx(claimed, abs=0.051)
    assert ap["AP50"] > 0.5
    # The card's "trained" columns are the training record's last evaluation, and the
    # model served as trained (padded to the canvas in the graph) scores the same.
    last = [100 * record["history"][-1][k] for k in ("AP", "AP50", "AP75")]
    assert [float(v) for v in row.split("|")[3:6]] == pytest.approx(last, abs=0.051)
    assert claimed == pytest.approx(last, abs=0.051)
