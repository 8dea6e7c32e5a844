#!/usr/bin/env python3
"""Trains the small (PLuG) Deformable DETR on generated detection scenes.

Scenes (gatescope.data.detection_scenes): 1-4 real Fashion-MNIST / MNIST crops on 64-128 px
canvases, 20 classes; every training step draws new scenes from the train split (scene
index = step * batch + i), the held-out scenes come from the test split only. Recipe:
AdamW (lr --lr, weight decay 1e-4), linear warm-up then cosine, gradient clipping 0.1 as the
public code, batch 8 on a 128 x 128 canvas with a padding mask, loss 2 focal + 5 L1 + 2 GIoU
with Hungarian matching. No model selection: the last step is kept; held-out AP is logged
for the record only. Input normalisation: pixels / 255, then (x - 0.5) / 0.5.

Usage: /usr/bin/python3 models/train_detector.py [--plug] --steps 6000 --threads 1 \
           --out build/train/plug_detr.ckpt
"""
import argparse
import json
import math
import pathlib
import sys
import time

import torch

from gatescope.data import detection_scenes as ds
from gatescope.detection_loss import SetCriterion, average_precision
from gatescope.detection import NORM_MEAN, NORM_STD, decode
from gatescope.networks.deformable_detr import DeformableDETR

CANVAS = (128, 128)


def batch_of(scenes):
    b = ds.collate_scenes(scenes, CANVAS)
    x = (b["images"] - NORM_MEAN) / NORM_STD
    return x.masked_fill(b["mask"].unsqueeze(1), 0.0), b


def evaluate(model, scenes, batch=16):
    model.eval()
    preds, targets = [], []
    with torch.no_grad():
        for i in range(0, len(scenes), batch):
            x, b = batch_of(scenes[i:i + batch])
            out = model(x, b["mask"])
            preds += [decode(out["logits"][j], out["boxes"][j], int(hw[0]), int(hw[1]), 0.0, 100)
                      for j, hw in enumerate(b["sizes"])]
            targets += [{"boxes": t["boxes"], "labels": t["labels"]} for t in b["targets"]]
    model.train()
    ap = average_precision(preds, targets)
    return {k: float(ap[k]) for k in ("AP", "AP50", "AP75")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plug", action="store_true")
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--held-out", type=int, default=500)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = DeformableDETR(num_classes=ds.NUM_CLASSES, plug=args.plug)
    criterion = SetCriterion(ds.NUM_CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / args.warmup
                                              if s < args.warmup else 0.5 * (1 + math.cos(
                                                  math.pi * (s - args.warmup) /
                                                  max(1, args.steps - args.warmup))))
    held_out = ds.make_scenes("heldout", args.held_out, seed=1234)
    history, t0, losses = [], time.time(), []
    for step in range(1, args.steps + 1):
        scenes = ds.make_scenes("train", args.batch, seed=args.seed,
                                start=(step - 1) * args.batch)
        x, b = batch_of(scenes)
        loss = criterion(model(x, b["mask"]), b["targets"])["loss"]
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:
            row = {"step": step, "loss": sum(losses) / len(losses),
                   "minutes": (time.time() - t0) / 60, **evaluate(model, held_out)}
            losses = []
            history.append(row)
            print(json.dumps(row), flush=True)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_state_dict": model.state_dict(),
                "config": {"num_classes": ds.NUM_CLASSES, "plug": args.plug},
                "labels": ds.LABELS, "history": history, "recipe": vars(args),
                "normalisation": {"mean": NORM_MEAN, "std": NORM_STD},
                "held_out": {"split": "heldout", "count": args.held_out, "seed": 1234}}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
