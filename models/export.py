#!/usr/bin/env python3
"""Exports a trained classifier checkpoint as self-describing TorchScript.

Writes <repo>/<name>/<version>/model.pt with the metadata JSON stored in the archive as the
extra file `gatescope.json` (task, input spec and normalisation, class names, token grid,
map kinds, required op library), and <repo>/<name>/README.md (the model card).
M-DGSA layers are routed through the fused op, so the op library must be built.

Usage: /usr/bin/python3 models/export.py --ckpt build/train/dgvit.ckpt --name dgvit_fmnist
"""
import argparse
import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gatescope import ops  # noqa: E402
from gatescope.data import fashion_mnist  # noqa: E402
from gatescope.networks import VitConfig, build_classifier  # noqa: E402

METADATA_FILE = "gatescope.json"


def metadata_for(name, cfg: VitConfig):
    grid = cfg.image_size // cfg.patch_size
    return {
        "name": name,
        "task": "image_classification",
        "arch": cfg.arch,
        "input": {"shape": [cfg.in_channels, cfg.image_size, cfg.image_size], "color": "gray",
                  "scale": 1.0 / 255.0, "mean": [fashion_mnist.MEAN], "std": [fashion_mnist.STD]},
        "labels": fashion_mnist.CLASS_NAMES,
        "outputs": ["logits"],
        "token_grid": [grid, grid],
        "cls_token": True,
        "maps": ["attention", "gate"] if cfg.arch == "dgvit" else ["attention"],
        "required_ops": ["gatescope"] if cfg.arch == "dgvit" else [],
        "max_batch_size": 64,
    }


def load_model(ckpt_path):
    ckpt = torch.load(ckpt_path, map_location="cpu")
    cfg = VitConfig(**ckpt["config"])
    model = build_classifier(cfg)
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, cfg, ckpt


def export(ckpt_path, name, repo, version="1"):
    ops.load()
    model, cfg, ckpt = load_model(ckpt_path)
    model.set_fused(True)
    scripted = torch.jit.script(model)
    meta = metadata_for(name, cfg)
    out_dir = pathlib.Path(repo) / name / version
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "model.pt"
    torch.jit.save(scripted, str(path), _extra_files={METADATA_FILE: json.dumps(meta)})
    return path, meta, ckpt


def write_card(repo, name, meta, ckpt):
    cfg = ckpt["config"]
    hist = ckpt["history"]
    lines = [
        f"# {name}", "",
        f"{cfg['arch'].upper()} image classifier for Fashion-MNIST (28x28 grayscale, 10 classes).", "",
        "## Data",
        f"- Trained on the Fashion-MNIST train split ({ckpt['train_images']} images) from Debian's "
        "`dataset-fashion-mnist` package; the 10,000 test images were never trained on.",
        "- Augmentation: random horizontal flip.", "",
        "## Config",
        "| key | value |", "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in cfg.items()],
        f"| parameters | {ckpt['parameters']} |", "",
        "## Training",
        f"- Command: `{ckpt['command']}` (Debian's /usr/bin/python3; "
        "`scripts/train_default_models.sh` retrains and re-exports both shipped models)",
        f"- Epochs: {len(hist)}, AdamW (weight decay 0.01), cosine schedule with warm-up, "
        f"batch 128, {ckpt['threads']} CPU thread(s), seed {ckpt['seed']}; "
        f"{ckpt['train_seconds'] / 60:.1f} min on a 2-core CPU machine.", "",
        "## Result",
        f"- Test accuracy on the 10,000 Fashion-MNIST test images: **{100 * hist[-1]['test_acc']:.2f} %**", "",
        "| epoch | train loss | test accuracy |", "| --- | --- | --- |",
        *[f"| {h['epoch']} | {h['train_loss']:.4f} | {100 * h['test_acc']:.2f} % |" for h in hist],
        "", "## Serving metadata (`gatescope.json` inside model.pt)", "```json",
        json.dumps(meta, indent=2), "```", "",
    ]
    (pathlib.Path(repo) / name / "README.md").write_text("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--repo", default=str(pathlib.Path(__file__).resolve().parents[1] /
                                          "model_repository"))
    ap.add_argument("--version", default="1")
    args = ap.parse_args(argv)
    path, meta, ckpt = export(args.ckpt, args.name, args.repo, args.version)
    write_card(args.repo, args.name, meta, ckpt)
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
