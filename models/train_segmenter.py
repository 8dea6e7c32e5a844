#!/usr/bin/env python3
"""Trains PVT-GDLA (or the PVT-LinearAttn baseline) on axial Colin27 MRI slices.

Recipe: AdamW (lr 5e-4, weight decay 1e-4, betas 0.9/0.999), linear warm-up then cosine,
batch 8, gradient clipping 1.0, loss = cross-entropy + soft Dice (foreground classes) on
the main output and, weighted 0.4, on each deep-supervision output; augmentation: random
left-right flip, gamma in [0.7, 1.4], shifts up to 12 px. Logits are compared with the
labels at the slice's own size (217 x 181), exactly as served. No model selection: the
last epoch is kept; held-out Dice is logged every --eval-every epochs for the card only.

Usage: /usr/bin/python3 models/train_segmenter.py --decoder gdla --variant b0 \
           --epochs 60 --threads 1 --out build/train/pvt_gdla.ckpt
"""
import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from gatescope.data.colin27 import CLASS_NAMES, load_slices
from gatescope.networks.pvt_seg import PvtSegmenter, SegConfig
from gatescope.segmentation import dice_per_class, logits_at, preprocess, segment

INPUT_SIZE = (224, 192)
DS_WEIGHT = 0.4


def augment(images: np.ndarray, labels: np.ndarray, rng: np.random.Generator):
    images, labels = images.copy(), labels.copy()
    for i in range(len(images)):
        if rng.random() < 0.5:
            images[i], labels[i] = images[i][:, ::-1], labels[i][:, ::-1]
        dy, dx = rng.integers(-12, 13, size=2)
        images[i] = np.roll(images[i], (dy, dx), axis=(0, 1))
        labels[i] = np.roll(labels[i], (dy, dx), axis=(0, 1))
    x = torch.from_numpy(images).float().unsqueeze(1) / 255.0
    gamma = torch.from_numpy(rng.uniform(0.7, 1.4, size=len(images))).float()
    x = x.pow(gamma.view(-1, 1, 1, 1))
    return x, torch.from_numpy(labels).long()


def seg_loss(logits: torch.Tensor, target: torch.Tensor, n_classes: int) -> torch.Tensor:
    ce = F.cross_entropy(logits, target)
    prob = logits.softmax(dim=1)[:, 1:]
    onehot = F.one_hot(target, n_classes).permute(0, 3, 1, 2)[:, 1:].float()
    inter = (prob * onehot).sum(dim=(0, 2, 3))
    dice = (2 * inter + 1.0) / (prob.sum(dim=(0, 2, 3)) + onehot.sum(dim=(0, 2, 3)) + 1.0)
    return ce + (1.0 - dice.mean())


def evaluate(model: PvtSegmenter, data) -> list:
    model.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(data["images"]), 8):
            images = torch.from_numpy(data["images"][i:i + 8]).unsqueeze(1)
            preds.append(segment(model, images, INPUT_SIZE))
    model.train()
    return dice_per_class(torch.cat(preds), torch.from_numpy(data["labels"]).long(),
                          len(CLASS_NAMES))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decoder", choices=["gdla", "la"], default="gdla")
    ap.add_argument("--variant", default="b0")
    ap.add_argument("--gate", default="sigmoid")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    data = load_slices()
    train = data["train"]
    cfg = SegConfig(decoder=args.decoder, variant=args.variant, in_chs=1,
                    n_classes=len(CLASS_NAMES), n_heads=[1, 2, 5, 8] if args.variant == "b0"
                    else [2, 4, 10, 16], gate=args.gate)
    model = PvtSegmenter(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999),
                            weight_decay=1e-4)
    steps_per_epoch = math.ceil(len(train["images"]) / args.batch)
    total, warm = args.epochs * steps_per_epoch, args.warmup * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / warm if s < warm else
                                              0.5 * (1 + math.cos(math.pi * (s - warm) /
                                                                  max(1, total - warm))))
    history = []
    size = tuple(train["images"].shape[1:])
    for epoch in range(1, args.epochs + 1):
        t0, losses = time.time(), []
        order = rng.permutation(len(train["images"]))
        for i in range(0, len(order), args.batch):
            idx = order[i:i + args.batch]
            x, y = augment(train["images"][idx], train["labels"][idx], rng)
            outs = model.forward_all(preprocess(x, INPUT_SIZE))
            loss = seg_loss(logits_at(outs[-1], size), y, cfg.n_classes)
            for aux in outs[:-1]:
                loss = loss + DS_WEIGHT * seg_loss(logits_at(aux, size), y, cfg.n_classes)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
        row = {"epoch": epoch, "loss": float(np.mean(losses)), "seconds": time.time() - t0}
        if epoch % args.eval_every == 0 or epoch == args.epochs:
            row["held_out_dice"] = evaluate(model, data["test"])
        history.append(row)
        print(json.dumps(row), flush=True)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_state_dict": model.state_dict(), "config": cfg.to_dict(),
                "input_size": list(INPUT_SIZE), "class_names": CLASS_NAMES,
                "history": history, "recipe": vars(args),
                "split": {"train_z": train["z"].tolist(), "test_z": data["test"]["z"].tolist()}},
               out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
