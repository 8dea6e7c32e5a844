#!/usr/bin/env python3
"""Trains a ViT, DGViT or DiffAttn-ViT classifier (optionally with DAR) on Fashion-MNIST (train split only) and evaluates it on
the 10,000 test images. Writes <out>.pt (state dict + config + metrics) for export.py.

Usage: /usr/bin/python3 models/train_classifier.py --arch dgvit --epochs 10 --out build/dgvit
"""
import argparse
import dataclasses
import json
import math
import os
import pathlib
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from gatescope.data import fashion_mnist
from gatescope.networks import ARCHS, VitConfig, build_classifier


def to_tensor(images: np.ndarray) -> torch.Tensor:
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - fashion_mnist.MEAN) / fashion_mnist.STD


def evaluate(model, x, y, batch_size=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch_size):
            logits = model(x[i:i + batch_size])["logits"]
            correct += int((logits.argmax(-1) == y[i:i + batch_size]).sum())
    return correct / x.shape[0]


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name or name.endswith("bias") else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", choices=ARCHS, default="dgvit")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup-steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N train images")
    ap.add_argument("--data-dir", default=str(fashion_mnist.DEFAULT_DIR))
    ap.add_argument("--out", required=True, help="output path prefix")
    fixed = ("arch", "num_classes", "image_size", "in_channels")
    tunable = [f for f in dataclasses.fields(VitConfig) if f.name not in fixed]
    for f in tunable:
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            ap.add_argument(flag, type=type(f.default), default=f.default)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    cfg = VitConfig(arch=args.arch, **{f.name: getattr(args, f.name) for f in tunable})
    cfg.dar_params()  # validates the DAR settings before any data is read

    train_x, train_y = fashion_mnist.load_split("train", args.data_dir)
    test_x, test_y = fashion_mnist.load_split("t10k", args.data_dir)
    if args.limit:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    x, y = to_tensor(train_x), torch.from_numpy(train_y.astype(np.int64))
    tx, ty = to_tensor(test_x), torch.from_numpy(test_y.astype(np.int64))

    model = build_classifier(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr,
                            betas=(0.9, 0.999), eps=1e-8)
    steps_per_epoch = math.ceil(x.shape[0] / args.batch_size)
    total = steps_per_epoch * args.epochs

    def lr_at(step):
        if step < args.warmup_steps:
            return args.lr * (step + 1) / args.warmup_steps
        frac = (step - args.warmup_steps) / max(1, total - args.warmup_steps)
        return 0.5 * args.lr * (1 + math.cos(math.pi * frac))

    print(f"{args.arch}: {n_params} parameters, {steps_per_epoch} steps/epoch", flush=True)
    step, history, t_start = 0, [], time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(x.shape[0])
        t0, loss_sum = time.time(), 0.0
        for i in range(0, x.shape[0], args.batch_size):
            idx = perm[i:i + args.batch_size]
            xb, yb = x[idx], y[idx]
            flip = torch.rand(xb.shape[0]) < 0.5
            xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            loss = F.cross_entropy(model(xb)["logits"], yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            loss_sum += float(loss) * xb.shape[0]
            step += 1
        dt = time.time() - t0
        acc = evaluate(model, tx, ty)
        history.append({"epoch": epoch + 1, "train_loss": loss_sum / x.shape[0],
                        "test_acc": acc, "images_per_s": x.shape[0] / dt})
        print(json.dumps(history[-1]), flush=True)

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"config": dataclasses.asdict(cfg), "parameters": n_params,
              "test_accuracy": history[-1]["test_acc"] if history else None,
              "history": history, "train_seconds": time.time() - t_start,
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "train_images": int(x.shape[0]), "threads": args.threads, "seed": args.seed}
    torch.save({"state_dict": model.state_dict(), **record}, str(out) + ".ckpt")
    with open(str(out) + ".train.json", "w") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {out}.ckpt", flush=True)


if __name__ == "__main__":
    main()
