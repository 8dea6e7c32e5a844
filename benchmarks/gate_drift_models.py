#!/usr/bin/env python3
"""How the served PLuG and GDLA gate statistics move when inputs are corrupted.

For PLuG-DeiT (Fashion-MNIST test images), PVT-GDLA (held-out Colin27 slices) and PLuG
Deformable DETR (held-out scenes), adds Gaussian noise of several standard deviations to the
pixels (on [0, 1], clipped, rounded back to uint8 as a client would send them), runs the
shipped TorchScript archive on the inputs preprocessed as the server does
(gatescope.export.monitoring_reference), and prints per noise level the task's quality
(accuracy, mean foreground Dice, AP) and the per-layer mean of the statistic the server
observes (`plug_scale_mean`, `gdla_gate_mean`). deploy/monitoring/drift_rules.py takes its
alert shifts from these tables (docs/benchmarks.md).

Usage: /usr/bin/python3 benchmarks/gate_drift_models.py [--images 1000] [--scenes 200]
           [--sigmas 0,0.05,0.1,0.2,0.3]
"""
import argparse

import numpy as np
import torch

from gatescope import detection, ops, paths, segmentation
from gatescope.data import colin27, detection_scenes, fashion_mnist
from gatescope.detection_loss import average_precision
from gatescope.export.archive import read_metadata
from gatescope.export.monitoring_reference import (classifier_inputs, detector_inputs,
                                                   segmenter_inputs)

REPO = paths.CHECKOUT / "model_repository"


def noisy(images, sigma, rng):
    x = images.astype(np.float32) / 255.0
    if sigma > 0:
        x = np.clip(x + rng.normal(0.0, sigma, x.shape).astype(np.float32), 0.0, 1.0)
    return np.round(x * 255.0).astype(np.uint8)


def load(name):
    path = REPO / name / "1" / "model.pt"
    return torch.jit.load(str(path)), read_metadata(path)


def plug_deit(images, labels, sigma):
    model, meta = load("plug_deit_fmnist")
    x = noisy(images, sigma, np.random.default_rng(0))
    stats, correct, seen = [], 0, 0
    with torch.no_grad():
        for batch in classifier_inputs(meta, x):
            out = model(batch)
            stats.append(out["plug_scale_mean"])
            pred = out["logits"].argmax(-1).numpy()
            correct += int((pred == labels[seen:seen + len(pred)]).sum())
            seen += len(pred)
    return f"{100 * correct / seen:.1f} %", torch.cat(stats)


def pvt_gdla(test, sigma):
    model, meta = load("pvt_gdla_colin27")
    x = noisy(test["images"], sigma, np.random.default_rng(0))
    stats, preds = [], []
    with torch.no_grad():
        for batch in segmenter_inputs(meta, x):
            out = model(batch)
            stats.append(out["gdla_gate_mean"])
            preds.append(segmentation.logits_at(out["logits"], x.shape[1:]).argmax(1))
    dice = segmentation.dice_per_class(torch.cat(preds), torch.from_numpy(test["labels"]).long(),
                                       len(meta["labels"]))
    return f"{100 * np.nanmean(dice[1:]):.1f}", torch.cat(stats)


def plug_detr(scenes, sigma):
    model, _ = load("plug_detr_scenes")
    rng = np.random.default_rng(0)
    images = [noisy(image, sigma, rng) for image, _, _ in scenes]
    stats, preds, targets = [], [], []
    with torch.no_grad():
        for image, x, (_, boxes, labels) in zip(images, detector_inputs(images), scenes):
            out = model(x)
            stats.append(out["plug_scale_mean"])
            h, w = image.shape
            preds.append(detection.decode(out["logits"][0], out["boxes"][0], h, w, 0.0, 100))
            targets.append({"boxes": torch.from_numpy(boxes).float(),
                            "labels": torch.from_numpy(labels).long()})
    return f"{100 * float(average_precision(preds, targets)['AP']):.1f}", torch.cat(stats)


def table(title, quality, rows):
    layers = rows[0][2].shape[1]
    print(f"### {title}\n")
    print(f"| sigma | {quality} | " + " | ".join(f"layer {l}" for l in range(layers)) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in range(layers)) + " |")
    for sigma, q, stats in rows:
        print(f"| {sigma:g} | {q} | " + " | ".join(f"{m:.4f}" for m in stats.mean(0).tolist())
              + " |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--scenes", type=int, default=200)
    ap.add_argument("--sigmas", default="0,0.05,0.1,0.2,0.3")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ops.load()
    sigmas = [float(s) for s in args.sigmas.split(",")]
    images, labels = fashion_mnist.load_split("t10k")
    images, labels = images[:args.images], labels[:args.images]
    table(f"plug_deit_fmnist: `plug_scale_mean`, first {args.images} test images", "accuracy",
          [(s, *plug_deit(images, labels, s)) for s in sigmas])
    test = colin27.load_slices()["test"]
    table(f"pvt_gdla_colin27: `gdla_gate_mean` per decoder stage, {len(test['images'])} "
          "held-out slices", "mean foreground Dice",
          [(s, *pvt_gdla(test, s)) for s in sigmas])
    scenes = detection_scenes.make_scenes("heldout", args.scenes, 1234)
    table(f"plug_detr_scenes: `plug_scale_mean` (layers 0-1 encoder, 2-3 decoder), first "
          f"{args.scenes} held-out scenes", "AP", [(s, *plug_detr(scenes, s)) for s in sigmas])


if __name__ == "__main__":
    main()
