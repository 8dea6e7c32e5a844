"""Pictures people can read (the client's side): explain panels carry colour bars on honest
scales, --scale shared|tile changes what a small map looks like, comparisons exist for
segmentation (Dice against --gt, difference row) and detection (true boxes found, points
outside the image counted), and every output directory gets run.json and index.html and is
never silently reused."""
import json

import numpy as np
import pytest

from gatescope.data import colin27, detection_scenes as ds, fashion_mnist
from gatescope.data.png import decode_png, encode_gray_png


def lines(res):
    return [json.loads(l) for l in res.stdout.splitlines() if l.strip()]


def png_rgb(path):
    """The PNG at `path` as an [H, W, 3] uint8 array (via OpenCV-free decode of RGB PNGs:
    the client writes 8-bit BGR PNGs, which decode_png returns as RGB)."""
    return decode_png(open(path, "rb").read())


@pytest.fixture(scope="module")
def fm_png(tmp_path_factory):
    images, _ = fashion_mnist.load_split("t10k")
    path = tmp_path_factory.mktemp("in") / "boot.png"
    path.write_bytes(encode_gray_png(images[0]))
    return path


def test_explain_writes_a_run_record_and_index_and_refuses_reuse(server, fm_png, tmp_path):
    out = tmp_path / "run"
    res = server.client("explain", "--model", "dgvit_fmnist", "--rollout", "--gates",
                        "--out", str(out), str(fm_png))
    assert res.returncode == 0, res.stdout + res.stderr
    record = json.loads((out / "run.json").read_text())
    assert record["command"] == "explain" and record["model"] == "dgvit_fmnist"
    assert record["version"] == "1" and record["task"] == "image_classification"
    assert record["server"] == server.address and "--gates" in record["command_line"]
    assert record["started"] <= record["finished"] and record["failures"] == 0
    [output] = record["outputs"]
    assert output["file"] == str(fm_png) and output["panel"] == "boot.png.panel.png"
    assert (out / output["panel"]).is_file()
    index = (out / "index.html").read_text()
    # Links are "./" plus the percent-encoded file name: always a file, never a scheme.
    assert '<img src="./boot.png.panel.png"' in index and "colour scale" in index
    assert 'src="./boot.png.rollout.png"' in index
    # A second run into the same directory is refused, and leaves the first one intact.
    again = server.client("explain", "--model", "vit_fmnist", "--rollout", "--out", str(out),
                          str(fm_png))
    assert again.returncode == 1 and "earlier run" in again.stderr and again.stdout == ""
    assert json.loads((out / "run.json").read_text())["model"] == "dgvit_fmnist"
    forced = server.client("explain", "--model", "vit_fmnist", "--rollout", "--overwrite",
                           "--out", str(out), str(fm_png))
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "run.json").read_text())["model"] == "vit_fmnist"


def test_shared_and_tile_scales_draw_different_pictures(server, fm_png, tmp_path):
    panels = {}
    for scale in ("shared", "tile"):
        out = tmp_path / scale
        res = server.client("explain", "--model", "dgvit_fmnist", "--gates", "--scale", scale,
                            "--out", str(out), str(fm_png))
        assert res.returncode == 0, res.stdout + res.stderr
        panels[scale] = png_rgb(out / "boot.png.panel.png")
    assert panels["shared"].shape == panels["tile"].shape
    # The input tile is the same; the gate tiles are coloured differently.
    assert (panels["shared"][18:162, :144] == panels["tile"][18:162, :144]).all()
    assert (panels["shared"][18:162, 144:] != panels["tile"][18:162, 144:]).any()
    bad = server.client("explain", "--model", "dgvit_fmnist", "--gates", "--scale", "log",
                        "--out", str(tmp_path / "bad"), str(fm_png))
    assert bad.returncode == 2 and "--scale" in bad.stderr


def test_segmentation_comparison_scores_dice_against_the_ground_truth(server, tmp_path):
    data = colin27.load_slices()["test"]
    image, labels = data["images"][20], data["labels"][20].astype(np.uint8)
    src, gt = tmp_path / "slice.png", tmp_path / "labels.png"
    src.write_bytes(encode_gray_png(image))
    gt.write_bytes(encode_gray_png(labels))
    out = tmp_path / "seg"
    res = server.client("explain", "--compare", "pvt_gdla_colin27,pvt_la_colin27", "--gt",
                        str(gt), "--query", "100,90", "--out", str(out), str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    [line] = lines(res)
    got = {m["model"]: m for m in line["models"]}
    assert set(got) == {"pvt_gdla_colin27", "pvt_la_colin27"}
    # Dice recomputed from each model's own mask (predict) agrees with the client's.
    for model, m in got.items():
        pred = lines(server.client("predict", "--model", model, "--out",
                                   str(tmp_path / ("p_" + model)), str(src)))[0]
        mask = decode_png(open(pred["mask_raw"], "rb").read())
        dice = []
        for c in sorted(set(np.unique(mask)) | set(np.unique(labels)) - {0}):
            if c == 0:
                continue
            p, g = mask == c, labels == c
            dice.append(2 * (p & g).sum() / (p.sum() + g.sum()))
        assert m["dice"] == pytest.approx(np.mean(dice), abs=1e-6)
        assert 0.5 < m["dice"] <= 1
    picture = png_rgb(line["compare"])
    # Two model rows and the difference row, each with a title, tiles, bars and captions.
    assert picture.shape[0] == 3 * (18 + 217 + 24 + 30)
    record = json.loads((out / "run.json").read_text())
    assert record["model"] == "pvt_gdla_colin27,pvt_la_colin27"
    assert record["task"] == "image_segmentation"


def test_detection_comparison_counts_true_boxes_and_points_outside(server, tmp_path):
    image, boxes, labels = ds.make_scenes("heldout", 3, seed=1234)[2]
    src, gt = tmp_path / "scene.png", tmp_path / "boxes.csv"
    src.write_bytes(encode_gray_png(image))
    gt.write_text("# x1,y1,x2,y2,label\n" + "".join(
        f"{b[0]},{b[1]},{b[2]},{b[3]},{int(l)}\n" for b, l in zip(boxes, labels)))
    res = server.client("explain", "--compare", "detr_scenes,plug_detr_scenes", "--gt",
                        str(gt), "--out", str(tmp_path / "det"), str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    [line] = lines(res)
    for m in line["models"]:
        assert m["true_boxes"] == len(boxes) and 0 <= m["found"] <= len(boxes)
        # The count the client prints is the count of points outside the image in the
        # response itself.
        pred = lines(server.client("explain", "--model", m["model"], "--out",
                                   str(tmp_path / ("e_" + m["model"])), str(src)))[0]
        assert pred["points"] == m["points"] and pred["points_outside"] == m["points_outside"]
        assert 0 < m["points_outside"] < m["points"]
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n")
    res = server.client("explain", "--compare", "detr_scenes,plug_detr_scenes", "--gt",
                        str(bad), "--out", str(tmp_path / "bad"), str(src))
    assert res.returncode == 2
    [line] = lines(res)
    assert line["error"]["code"] == "INVALID_ARGUMENT" and "line 1" in line["error"]["message"]


def test_comparing_models_of_different_tasks_is_refused(server, fm_png, tmp_path):
    res = server.client("explain", "--compare", "dgvit_fmnist,pvt_gdla_colin27", "--out",
                        str(tmp_path / "mixed"), str(fm_png))
    assert res.returncode == 2
    [line] = lines(res)
    assert line["error"]["code"] == "INVALID_ARGUMENT" and "one task" in line["error"]["message"]
