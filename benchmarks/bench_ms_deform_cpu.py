#!/usr/bin/env python3
"""gatescope::ms_deform_attn (CPU) vs the eager grid_sample reference, side by side.

Cases (8 heads, 32 channels per head, 4 sampling points, fp32):
  decoder-300:   batch 2, 300 queries, levels (32,32) (16,16) (8,8) (4,4)
                 (S = 1360: a 256x256 image at strides 8..64) -- the realistic decoder case
  decoder-1000:  batch 2, 1000 queries, levels (64,64) (32,32) (16,16) (8,8)
                 (S = 5440: a 512x512 image at strides 8..64)
  encoder-5440:  batch 1, every position of the decoder-1000 pyramid queries it
                 (Lq = S = 5440, Deformable DETR's encoder self-attention)
Each variant runs in its own fresh process so that peak resident memory (ru_maxrss above
the level after building the inputs) is attributable to it, with glibc's mmap threshold
fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_, unless already set) as in bench_attention_cpu.py.
Prints one table row per case: median times, the speed-up, the extra resident memory of
each and their ratio, and the max abs difference between the two outputs.

Usage: /usr/bin/python3 benchmarks/bench_ms_deform_cpu.py [--threads 2] [--repeats 9]
           [--cases decoder-300 decoder-1000 encoder-5440]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HEADS, CHANNELS, POINTS = 8, 32, 4
SMALL_PYRAMID = [(32, 32), (16, 16), (8, 8), (4, 4)]
LARGE_PYRAMID = [(64, 64), (32, 32), (16, 16), (8, 8)]
# name -> (batch, queries (None: every position), levels)
CASES = {
    "decoder-300": (2, 300, SMALL_PYRAMID),
    "decoder-1000": (2, 1000, LARGE_PYRAMID),
    "encoder-5440": (1, None, LARGE_PYRAMID),
}


def inputs(case):
    import torch
    from gatescope.attention.ms_deform import level_start_index
    batch, queries, levels = CASES[case]
    shapes = torch.tensor(levels, dtype=torch.long)
    s = int((shapes[:, 0] * shapes[:, 1]).sum())
    lq = s if queries is None else queries
    g = torch.Generator().manual_seed(0)
    value = torch.randn(batch, s, HEADS, CHANNELS, generator=g)
    # Reference points inside the map plus offsets of a few pixels, some landing outside.
    loc = torch.rand(batch, lq, HEADS, len(levels), POINTS, 2, generator=g) * 1.1 - 0.05
    w = torch.rand(batch, lq, HEADS, len(levels) * POINTS, generator=g).softmax(-1)
    w = w.view(batch, lq, HEADS, len(levels), POINTS)
    return value, shapes, level_start_index(shapes), loc, w


def worker(case, mode, threads, repeats, out_path):
    import torch
    from gatescope import ops
    from gatescope.attention.ms_deform import ms_deform_attn_reference
    torch.set_num_threads(threads)
    ops.load()
    value, shapes, starts, loc, w = inputs(case)
    if mode == "fused":
        fn = lambda: torch.ops.gatescope.ms_deform_attn(value, shapes, starts, loc, w)  # noqa
    else:
        fn = lambda: ms_deform_attn_reference(value, shapes, loc, w)  # noqa
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.inference_mode():
        for _ in range(2):  # warm-up (thread pool start, allocator)
            out = fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.save(out, out_path)
    times.sort()
    print(json.dumps({"ms": 1000 * times[len(times) // 2],
                      "extra_rss_mb": (peak - base_rss) / 1024}))


def run(case, mode, a, out_path):
    cmd = [sys.executable, __file__, "--worker", mode, "--cases", case, "--threads",
           str(a.threads), "--repeats", str(a.repeats), "--out", out_path]
    env = dict(os.environ)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--worker", choices=["eager", "fused"])
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.worker:
        worker(a.cases[0], a.worker, a.threads, a.repeats, a.out)
        return
    import tempfile

    import torch
    load = os.getloadavg()
    print(f"ms_deform_attn CPU, {HEADS} heads, {CHANNELS} channels per head, {POINTS} points, "
          f"fp32, {a.threads} threads, median of {a.repeats}; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print("| case | N | Lq | S | eager ms | fused ms | fused speed-up | eager extra RSS MB "
          "| fused extra RSS MB | memory ratio | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for case in a.cases:
            batch, queries, levels = CASES[case]
            s = sum(h * w for h, w in levels)
            e_path, f_path = os.path.join(tmp, "e.pt"), os.path.join(tmp, "f.pt")
            e, f = run(case, "eager", a, e_path), run(case, "fused", a, f_path)
            diff = float((torch.load(e_path) - torch.load(f_path)).abs().max())
            ratio = (f"{e['extra_rss_mb'] / f['extra_rss_mb']:.1f}x" if f["extra_rss_mb"] >= 0.1
                     else "n/a")
            print(f"| {case} | {batch} | {queries or s} | {s} | {e['ms']:.2f} | {f['ms']:.2f} | "
                  f"{e['ms'] / f['ms']:.2f}x | {e['extra_rss_mb']:.1f} | "
                  f"{f['extra_rss_mb']:.1f} | {ratio} | {diff:.1e} |", flush=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
