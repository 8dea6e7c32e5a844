#!/usr/bin/env python3
"""The shipped PLuG Deformable DETR on CPU: the served TorchScript (fused
gatescope::ms_deform_attn) vs the same network in eager PyTorch (grid_sample per level),
side by side in one run, and batched vs one image at a time.

Cases (grayscale, random pixels in the model's normalised range):
  128x128 batch 1, 128x128 batch 8 (the training canvas), 512x512 batch 1 (a 16x larger
  image: encoder length 5456 tokens instead of 340).
Prints one markdown row per case: median milliseconds per image of each, the speed-up, and
the max abs difference of the logits; then the batching gain of the served model at 128x128
(per-image time at batch 1 / per-image time at batch 8).

Usage: /usr/bin/python3 benchmarks/bench_detector_cpu.py [--threads 2] [--repeats 7]
"""
import argparse
import pathlib
import statistics
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]

CASES = [(128, 128, 1), (128, 128, 8), (512, 512, 1)]


def median_ms(fn, x, repeats):
    with torch.inference_mode():
        for _ in range(3):  # TorchScript's profiling runs and allocator warm-up
            fn(x)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from gatescope import ops
    from gatescope.served_detector import ServedDetector
    from gatescope.export.detector import load_detector
    ops.load()
    served = torch.jit.load(str(ROOT / "model_repository" / "plug_detr_scenes" / "1" /
                                "model.pt"))
    net, _ = load_detector(ROOT / "models" / "checkpoints" / "plug_detr_scenes.ckpt")
    eager = ServedDetector(net)
    print(f"threads {args.threads}, median of {args.repeats}")
    print("| input | batch | served (fused) ms/image | eager ms/image | speed-up | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- |")
    per_image = {}
    g = torch.Generator().manual_seed(0)
    for h, w, b in CASES:
        x = torch.rand(b, 1, h, w, generator=g) * 2 - 1
        t_fused, a = median_ms(served, x, args.repeats)
        t_eager, e = median_ms(eager, x, args.repeats)
        per_image[(h, w, b)] = t_fused / b
        diff = float((a["logits"] - e["logits"]).abs().max())
        print(f"| {h}x{w} | {b} | {t_fused / b:.1f} | {t_eager / b:.1f} | "
              f"{t_eager / t_fused:.2f}x | {diff:.1e} |")
    gain = per_image[(128, 128, 1)] / per_image[(128, 128, 8)]
    print(f"\nserved model, 128x128: batch 8 is {gain:.2f}x the per-image throughput of batch 1")


if __name__ == "__main__":
    main()
