"""The shipped checkpoints: contract, metadata, and the test accuracy their cards claim."""
import json
import pathlib
import re

import numpy as np
import pytest
import torch

from gatescope.data import fashion_mnist

REPO = pathlib.Path(__file__).resolve().parents[2] / "model_repository"


@pytest.fixture(scope="module")
def fashion_test_split():
    images, labels = fashion_mnist.load_split("t10k")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - fashion_mnist.MEAN) / fashion_mnist.STD, torch.from_numpy(labels.astype(np.int64))


@pytest.mark.parametrize("name,min_acc", [("dgvit_fmnist", 0.89), ("vit_fmnist", 0.85),
                                          ("darvit_fmnist", 0.85), ("diffvit_fmnist", 0.85),
                                          ("deit_fmnist", 0.85), ("plug_deit_fmnist", 0.85)])
def test_accuracy_matches_model_card(ops, fashion_test_split, name, min_acc):
    path = REPO / name / "1" / "model.pt"
    assert path.stat().st_size < 20 * 2**20
    extra = {"gatescope.json": ""}
    model = torch.jit.load(str(path), _extra_files=extra)
    meta = json.loads(extra["gatescope.json"])
    assert meta["task"] == "image_classification"
    assert meta["labels"] == fashion_mnist.CLASS_NAMES
    assert meta["input"]["mean"] == [fashion_mnist.MEAN]
    x, y = fashion_test_split
    with torch.no_grad():
        pred = torch.cat([model(x[i:i + 1000])["logits"].argmax(-1) for i in range(0, 10000, 1000)])
    acc = float((pred == y).float().mean())
    card = (REPO / name / "README.md").read_text()
    claimed = float(re.search(r"\*\*([0-9.]+) %\*\*", card).group(1)) / 100
    assert abs(acc - claimed) < 0.0006, (acc, claimed)  # fused vs eager rounding only
    assert acc >= min_acc


@pytest.mark.parametrize("name", ["pvt_gdla_colin27", "pvt_la_colin27"])
def test_segmenter_dice_matches_model_card(ops, name):
    """Held-out Dice per class recomputed from the shipped TorchScript equals the card's."""
    from gatescope.data import colin27
    from gatescope.export import segmentation_card
    model, meta, record = segmentation_card.load(REPO, name)
    assert meta["task"] == "image_segmentation" and meta["labels"] == colin27.CLASS_NAMES
    assert meta["input"]["normalization"] == "minmax" and meta["input"]["any_size"]
    assert record["split"]["test_z"] == colin27.load_slices()["test"]["z"].tolist()
    dice = segmentation_card.held_out_dice(model, meta, colin27.load_slices()["test"])
    row = next(line for line in (REPO / name / "README.md").read_text().splitlines()
               if line.startswith(f"| {name} "))
    claimed = [float(v.strip(" *")) for v in row.split("|")[2:2 + len(dice)]]
    assert [round(100 * d, 2) for d in dice] == pytest.approx(claimed, abs=0.011)
    assert min(dice) > 0.5 and dice[0] > 0.97
