#!/usr/bin/env python3
"""gatescope::dgsa_attention with a key padding mask vs the eager masked M-DGSA reference
(gatescope.attention.dgsa.dgsa_reference), and the fused op without a mask, at served text
lengths.

Shapes follow a text model of dim 64 with 2 heads: d' = 16 per stream, dv = 32 (the op's
specialised d=16, dv=32 kernel). For each batch size B and padded length N, row 0 of the
batch is N tokens long and every other row a length drawn uniformly from [N/4, N] (a batch
padded to its longest request, as the server builds it); the mask marks the real tokens.
"fused, no mask" runs the same padded tensors without the mask (what a caller without
mask support would pay, and, at B = 1 where nothing is padded, the mask's own overhead).

The three variants are timed in turn within each repeat (eager, one untimed fused call so
that no timed fused call directly follows the eager reference's large frees and cache
traffic, then the two fused variants in alternating order), so drifting load on a shared
machine affects them alike. Each cell is the median
of at least --repeats repeats (more, up to 500, when a fused call is short, so that each is
sampled for about 0.3 s). float32, one Torch thread. --clock cpu (the default) times the
calling thread's CPU time, which with one Torch thread is all of a call's work and leaves
out time spent waiting for a core on a busy machine; --clock wall times elapsed time (what
a caller sees on an otherwise idle machine).

Usage: /usr/bin/python3 benchmarks/bench_dgsa_mask.py [--batch 1 16] [--n 16 64 128 256]
           [--repeats 31] [--threads 1] [--clock cpu|wall]
"""
import argparse
import time

import torch

from gatescope import ops
from gatescope.attention.dgsa import dgsa_reference

HEADS, D, DV = 2, 16, 32


def problem(b, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    args = [r(b, HEADS, n, D), r(b, HEADS, n, D), r(b, HEADS, n, D), r(b, HEADS, n, D),
            r(b, HEADS, n, DV), torch.rand(b, HEADS, n, generator=g)]
    lengths = torch.randint(max(1, n // 4), n + 1, (b,), generator=g)
    lengths[0] = n
    mask = torch.arange(n)[None, :] < lengths[:, None]  # bool [B, N], True = real token
    return args, mask


def median_ms(samples):
    samples = sorted(samples)
    return 1000 * samples[len(samples) // 2]


def time_variants(eager, fused, repeats, clock):
    """{name: median ms} of the eager reference and of each fused variant ({name: fn}).
    Each repeat times the eager call, makes one untimed fused call (so no timed fused call
    ever follows the eager one's large frees and cache traffic directly), then times the
    fused variants in an order that alternates between repeats."""
    for fn in [eager, *fused.values()]:  # warm-up: thread pool, allocator, first calls
        for _ in range(3):
            fn()
    first = next(iter(fused.values()))
    t0 = clock()
    first()
    repeats = max(repeats, min(500, int(0.3 / max(clock() - t0, 1e-6))))
    names = list(fused)
    samples = {"eager": [], **{name: [] for name in names}}
    for i in range(repeats):
        t0 = clock()
        eager()
        samples["eager"].append(clock() - t0)
        first()  # untimed
        for name in (names if i % 2 == 0 else names[::-1]):
            t0 = clock()
            fused[name]()
            samples[name].append(clock() - t0)
    return {name: median_ms(s) for name, s in samples.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--n", type=int, nargs="+", default=[16, 64, 128, 256])
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    a = ap.parse_args()
    if a.clock == "cpu" and a.threads != 1:
        ap.error("--clock cpu measures the calling thread only: use it with --threads 1")
    clock = time.thread_time if a.clock == "cpu" else time.perf_counter
    torch.set_num_threads(a.threads)
    ops.load()
    op = torch.ops.gatescope.dgsa_attention
    print(f"dgsa_attention CPU with key_padding_mask: {HEADS} heads, d'={D}, dv={DV} "
          f"(dim {2 * HEADS * D}), float32, {a.threads} Torch thread(s), "
          f"median {a.clock} time of at least {a.repeats} repeats")
    print()
    print("| B | N | real tokens | eager masked ms | fused masked ms | fused, no mask ms "
          "| eager / fused masked | fused masked / no mask |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with torch.inference_mode():
        for b in a.batch:
            for n in a.n:
                args, mask = problem(b, n)
                # Same answer from both masked paths before timing them.
                err = (op(*args, mask) - dgsa_reference(*args, mask)).abs().max().item()
                assert err < 1e-4, err
                ms = time_variants(lambda: dgsa_reference(*args, mask), {
                    "masked": lambda: op(*args, mask),
                    "plain": lambda: op(*args),
                }, a.repeats, clock)
                real = int(mask.sum())
                print(f"| {b} | {n} | {real} / {b * n} | {ms['eager']:.3f} | "
                      f"{ms['masked']:.3f} | {ms['plain']:.3f} | "
                      f"{ms['eager'] / ms['masked']:.2f}x | "
                      f"{ms['masked'] / ms['plain']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
