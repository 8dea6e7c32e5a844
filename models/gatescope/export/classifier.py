"""Exports a trained classifier checkpoint as self-describing TorchScript.

Writes <repo>/<name>/<version>/model.pt with the metadata JSON stored in the archive as the
extra file `gatescope.json` (task, input spec and normalisation, class names, token grid,
map kinds, layer and head counts, required op library) and the training record as
`training.json`, and <repo>/<name>/README.md (the model card). Every attention layer is
routed through the fused ops, so the op library must be built.

--ckpt takes a training checkpoint (train_classifier.py's .ckpt) or an exported model.pt
(its weights and training.json), so a shipped model can be re-exported after a change of
the model contract without retraining.

Usage: /usr/bin/python3 models/export.py --ckpt build/train/dgvit.ckpt --name dgvit_fmnist
"""
import argparse
import json
import pathlib

import torch

from gatescope import ops, paths
from gatescope.data import fashion_mnist
from gatescope.export.archive import TRAINING_FILE, save_model
from gatescope.networks import VitConfig, build_classifier

ARCH_TITLES = {"dgvit": "DGViT (M-DGSA)", "vit": "ViT", "diffvit": "DiffAttn-ViT",
               "deit": "DeiT (timm parameter names)",
               "plug_deit": "PLuG-DeiT (pairwise logit gating, timm parameter names)"}


def map_kinds(cfg: VitConfig):
    kinds = ["attention"]
    if cfg.arch == "dgvit":
        kinds.append("gate")
    if cfg.arch == "plug_deit":
        kinds.append("plug_gate")
    if cfg.dar:
        kinds += ["resonance", "vigilance"]
    return kinds


def output_names(cfg: VitConfig):
    names = ["logits"]
    if cfg.arch == "dgvit":
        names.append("gate_mean")
    if cfg.arch == "plug_deit":
        names.append("plug_scale_mean")
    if cfg.dar:
        names.append("vigilance_mean")
    return names


def metadata_for(name, cfg: VitConfig):
    grid = cfg.image_size // cfg.patch_size
    meta = {
        "name": name,
        "task": "image_classification",
        "arch": cfg.arch,
        "input": {"shape": [cfg.in_channels, cfg.image_size, cfg.image_size], "color": "gray",
                  "scale": 1.0 / 255.0, "mean": [fashion_mnist.MEAN], "std": [fashion_mnist.STD]},
        "labels": fashion_mnist.CLASS_NAMES,
        "outputs": output_names(cfg),
        "token_grid": [grid, grid],
        "cls_token": True,
        "maps": map_kinds(cfg),
        "required_ops": ["gatescope"],
        "max_batch_size": 64,
        "layers": cfg.depth,
        "heads": cfg.heads,
    }
    if cfg.dar:
        meta["dar"] = {"strength": cfg.dar_lambda, "vigilance": cfg.dar_rho,
                       "sharpness": cfg.dar_alpha, "beta": cfg.dar_beta, "steps": cfg.dar_steps}
    return meta


def read_checkpoint(path):
    """A training record with "state_dict", "config", "history", ... from a .ckpt or an
    exported model.pt."""
    path = str(path)
    if path.endswith(".ckpt"):
        return torch.load(path, map_location="cpu")
    extra = {TRAINING_FILE: ""}
    module = torch.jit.load(path, map_location="cpu", _extra_files=extra)
    if not extra[TRAINING_FILE]:
        raise ValueError(f"{path} carries no {TRAINING_FILE}")
    record = json.loads(extra[TRAINING_FILE])
    record["state_dict"] = module.state_dict()
    return record


def load_model(ckpt_path):
    ckpt = read_checkpoint(ckpt_path)
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
    record = {k: v for k, v in ckpt.items() if k != "state_dict"}
    return save_model(scripted, repo, name, version, meta, record), meta, ckpt


def write_card(repo, name, meta, ckpt):
    cfg = ckpt["config"]
    hist = ckpt["history"]
    title = ARCH_TITLES[cfg["arch"]] + (" with DAR" if cfg.get("dar") else "")
    dar_lines = []
    if cfg.get("dar"):
        dar_lines = [
            "## DAR (differentiable adaptive resonance)",
            f"Every attention logit gets the bounded prior lambda * sigmoid(alpha (c - rho)) with "
            f"lambda = {cfg['dar_lambda']}, rho = {cfg['dar_rho']}, alpha = {cfg['dar_alpha']}, "
            f"{cfg['dar_steps']} resonance step(s) (beta = {cfg['dar_beta']}); c is the "
            "query-key cosine. Explain returns its resonance maps and vigilance-crossing "
            "fractions Pr[c > rho].", ""]
    lines = [
        f"# {name}", "",
        f"{title} image classifier for Fashion-MNIST (28x28 grayscale, 10 classes).", "",
        *dar_lines,
        "## Data",
        f"- Trained on the Fashion-MNIST train split ({ckpt['train_images']} images) from Debian's "
        "`dataset-fashion-mnist` package; the 10,000 test images were never trained on.",
        "- Augmentation: random horizontal flip.", "",
        "## Config",
        "| key | value |", "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in cfg.items() if cfg.get("dar") or not k.startswith("dar_")],
        f"| parameters | {ckpt['parameters']} |", "",
        "## Training",
        f"- Command: `{ckpt['command']}` (Debian's /usr/bin/python3; "
        "`scripts/train_default_models.sh` retrains and re-exports the shipped models)",
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
    ap.add_argument("--repo", default=str(paths.CHECKOUT / "model_repository"))
    ap.add_argument("--version", default="1")
    args = ap.parse_args(argv)
    path, meta, ckpt = export(args.ckpt, args.name, args.repo, args.version)
    write_card(args.repo, args.name, meta, ckpt)
    print(f"wrote {path} ({path.stat().st_size} bytes)")
