"""Evaluates exported Colin27 segmentation models on the held-out slices and writes their
model cards. Each card gives the data, split, recipe, training history and the Dice per
class of every model compared (same recipe, same held-out slices), measured here on the
exported TorchScript (fused ops), at the slices' own 217 x 181 size.

Usage: /usr/bin/python3 models/segmentation_card.py --models pvt_gdla_colin27 pvt_la_colin27
"""
import argparse
import json
import math
import pathlib

import torch

from gatescope import ops, paths
from gatescope.data import colin27
from gatescope.export.archive import METADATA_FILE, TRAINING_FILE
from gatescope.segmentation import dice_per_class, segment

REPO = paths.CHECKOUT / "model_repository"
TITLES = {"pvt_gdla": "PVT-GDLA", "pvt_linear_attn": "PVT-LinearAttn"}


def load(repo, name):
    extra = {METADATA_FILE: "", TRAINING_FILE: ""}
    model = torch.jit.load(str(pathlib.Path(repo) / name / "1" / "model.pt"), _extra_files=extra)
    return model, json.loads(extra[METADATA_FILE]), json.loads(extra[TRAINING_FILE])


def held_out_dice(model, meta, test) -> list:
    size = tuple(meta["input"]["shape"][1:])
    images = torch.from_numpy(test["images"]).unsqueeze(1)
    with torch.no_grad():
        pred = torch.cat([segment(lambda x: model(x)["logits"], images[i:i + 8], size)
                          for i in range(0, len(images), 8)])
    return dice_per_class(pred, torch.from_numpy(test["labels"]).long(), len(meta["labels"]))


def fmt(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{100 * v:.2f}"


def card(name, meta, record, results, test_z) -> str:
    labels = meta["labels"]
    rec = record["recipe"]
    hist = record["history"]
    minutes = sum(h["seconds"] for h in hist) / 60
    rows = []
    for other, (ometa, dice) in results.items():
        fg = [d for d in dice[1:] if not math.isnan(d)]
        rows.append(f"| {other} ({TITLES[ometa['arch']]}) | " + " | ".join(fmt(d) for d in dice)
                    + f" | **{fmt(sum(fg) / len(fg))}** |")
    cfg = record["config"]
    return "\n".join([
        f"# {name}", "",
        f"{TITLES[meta['arch']]} brain MRI segmentation: PVT-v2-{cfg['variant']} encoder, three "
        f"{'gated differential linear attention (GDLA)' if cfg['decoder'] == 'gdla' else 'linear attention'}"
        " decoder stages, trained from scratch (no pretrained encoder can be fetched here)."
        + (" It is the linear-attention baseline of PVT-GDLA: same encoder, recipe and data."
           if cfg["decoder"] == "la" else ""), "",
        "## Data",
        "- Colin27 T1 MRI (`ch2.nii.gz`) from Debian's `mricron-data`, one subject, 1 mm; "
        "labels from its brain mask (`ch2bet`) and the AAL atlas (`aal`), grouped into "
        + ", ".join(f"{i} {n}" for i, n in enumerate(labels)) + " (see "
        "`models/gatescope/data/colin27.py` for the AAL ranges).",
        f"- Axial slices (217 x 181) with at least {colin27.MIN_BRAIN_PIXELS} brain pixels. "
        f"Held out: slabs z = {', '.join(f'{a}-{b}' for a, b in colin27.HELD_OUT_SLABS)} "
        f"({len(test_z)} slices); training ({len(record['split']['train_z'])} slices) excludes "
        f"{colin27.GAP} slices either side of every slab, so no training slice neighbours a "
        "held-out one. The held-out slices were never trained on and not used to choose "
        "anything (the last epoch is kept).", "",
        "## Held-out Dice (%) per class, same recipe, same slices", "",
        "| model | " + " | ".join(labels) + " | mean foreground |",
        "| --- |" + " --- |" * (len(labels) + 1),
        *rows, "",
        "Dice over all held-out pixels of each class, computed on the exported TorchScript at "
        "the slices' own size (logits resized back bilinearly, as the server does). One "
        "training seed per model, one subject: differences of a point or two are within what "
        "another seed could change; the deep-grey class (18,873 training pixels) is the "
        "least stable.", "",
        "## Recipe",
        f"- `{' '.join(['models/train_segmenter.py'] + [f'--{k} {v}' for k, v in rec.items() if k in ('decoder', 'variant', 'epochs', 'threads', 'seed')])}`"
        f" ({len(hist)} epochs, {minutes:.0f} min on a 2-core CPU machine, batch {rec['batch']}, "
        f"AdamW lr {rec['lr']}, warm-up {rec['warmup']} epochs then cosine; loss cross-entropy + "
        "soft Dice, deep supervision 0.4; flips, shifts, gamma). "
        "`scripts/train_default_models.sh` retrains everything.",
        "- Model input 224 x 192 (H x W, bilinear resize), per-image min-max scaling; the "
        "server accepts any size and returns the class map at the input's size.", "",
        "| epoch | loss | held-out Dice per class (%) |", "| --- | --- | --- |",
        *[f"| {h['epoch']} | {h['loss']:.4f} | "
          + (" / ".join(fmt(d) for d in h["held_out_dice"]) if "held_out_dice" in h else "")
          + " |" for h in hist if "held_out_dice" in h or h["epoch"] == 1], "",
        "## Config", "```json", json.dumps(cfg, indent=2), "```", "",
        "## Serving metadata (`gatescope.json` inside model.pt)", "```json",
        json.dumps(meta, indent=2), "```", ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--repo", default=str(REPO))
    args = ap.parse_args(argv)
    ops.load()
    torch.set_num_threads(2)
    test = colin27.load_slices()["test"]
    loaded = {n: load(args.repo, n) for n in args.models}
    results = {n: (meta, held_out_dice(m, meta, test)) for n, (m, meta, _) in loaded.items()}
    for name, (_, meta, record) in loaded.items():
        text = card(name, meta, record, results, test["z"].tolist())
        (pathlib.Path(args.repo) / name / "README.md").write_text(text)
        print(name, [fmt(d) for d in results[name][1]])
    return 0
