#!/usr/bin/env python3
"""Fused CPU attention ops vs their eager references, side by side.

--op dgsa: gatescope::dgsa_attention vs the eager M-DGSA reference; shapes follow the DGSA
paper's vision config (dim 256, 8 heads: d' = 16 per stream, dv = 32).
--op dar: gatescope::dar_attention (lambda 0.4, rho 0.5, alpha 8, one resonance step) vs
the eager DAR reference (logits + cosine + resonance maps); pass e.g. --d 32 --dv 32.
--op gdla: gatescope::gdla_attention (sigmoid gate, RMS-norm weight, lambda [H, D]) vs the
eager GDLA reference; defaults follow a PVT-GDLA stage-1 decoder (dim 64, 2 heads: D = 32
per head, --d is D; --dv is unused) at N = 3136 and 16384 tokens (224^2 and 512^2 inputs
at stride 4).
--op plug: gatescope::plug_attention (tanh gate, gml w = (0.6, -0.8), b = (0.2, 0.9)) vs the
eager PLuG reference (logits, R and G maps); defaults follow DeiT-S (6 heads, d = dv = 64,
gate dim dg = d).
For each sequence length N, each variant runs in its own fresh process so that peak
resident memory (ru_maxrss) is attributable to it; the workers run with glibc's mmap
threshold fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_, unless already set), so large buffers
are returned on free and repeated calls do not pile up retained heap in the peak. Prints
one table row per N with times, the speed ratio, the extra resident memory of each and
their ratio. Batch 1.

Usage: /usr/bin/python3 benchmarks/bench_attention_cpu.py [--op dgsa|dar|gdla|plug]
           [--threads 2] [--n 197 1024 4096]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

DAR = dict(lam=0.4, rho=0.5, alpha=8.0, beta=0.0, steps=1)
GDLA = dict(eps=1e-5, gate=0)
PLUG = dict(w=(0.6, -0.8), b=(0.2, 0.9), tanh_gate=True)
# Per-op defaults of --n, --heads, --d and --dv.
DEFAULTS = {
    "dgsa": dict(n=[197, 1024, 4096], heads=8, d=16, dv=32),
    "dar": dict(n=[197, 1024, 4096], heads=8, d=16, dv=32),
    "gdla": dict(n=[3136, 16384], heads=2, d=32, dv=32),
    "plug": dict(n=[197, 1024, 4096], heads=6, d=64, dv=64),
}


def problem(op, mode, n, heads, d, dv):
    """(function, arguments) of one variant."""
    import torch
    from gatescope.attention.dar import dar_reference
    from gatescope.attention.dgsa import dgsa_reference
    from gatescope.attention.gdla import gdla_reference
    g = torch.Generator().manual_seed(0)
    if op == "plug":
        from gatescope.attention.plug import plug_reference
        args = [torch.randn(1, heads, n, d, generator=g), torch.randn(1, heads, n, d, generator=g),
                torch.randn(1, heads, n, dv, generator=g), torch.randn(1, n, d, generator=g),
                torch.randn(1, n, d, generator=g), torch.tensor(PLUG["w"]).reshape(2, 1),
                torch.tensor(PLUG["b"])]
        fn = torch.ops.gatescope.plug_attention if mode == "fused" else plug_reference
        return (lambda *t: fn(*t, d ** -0.5, d ** -0.5, PLUG["tanh_gate"])), args
    if op == "gdla":
        args = [torch.randn(1, heads, n, d, generator=g) for _ in range(4)]
        args += [0.1 * torch.randn(heads, d, generator=g), 1 + 0.1 * torch.randn(d, generator=g)]
        if mode == "fused":
            return (lambda q, k, v, gate, lam, w: torch.ops.gatescope.gdla_attention(
                q, k, v, gate, lam, w, GDLA["eps"], GDLA["gate"])), args
        return (lambda q, k, v, gate, lam, w: gdla_reference(
            q, k, v, gate, lam, w, GDLA["eps"], GDLA["gate"])), args
    if op == "dar":
        args = [torch.randn(1, heads, n, d, generator=g), torch.randn(1, heads, n, d, generator=g),
                torch.randn(1, heads, n, dv, generator=g)]
        if mode == "fused":
            return (lambda q, k, v: torch.ops.gatescope.dar_attention(
                q, k, v, None, False, DAR["lam"], DAR["rho"], DAR["alpha"], DAR["beta"],
                DAR["steps"])), args
        return (lambda q, k, v: dar_reference(q, k, v, **DAR)), args
    args = [torch.randn(1, heads, n, d, generator=g) for _ in range(4)]
    args.insert(4, torch.randn(1, heads, n, dv, generator=g))
    args.append(torch.rand(1, heads, n, generator=g))
    return (torch.ops.gatescope.dgsa_attention if mode == "fused" else dgsa_reference), args


def worker(op, mode, n, threads, heads, d, dv, repeats):
    import torch
    from gatescope import ops
    torch.set_num_threads(threads)
    ops.load()
    fn, args = problem(op, mode, n, heads, d, dv)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.inference_mode():
        for _ in range(3):  # warm-up (thread pool start, allocator)
            fn(*args)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times.sort()
    print(json.dumps({"ms": 1000 * times[len(times) // 2], "extra_rss_mb": (peak - base_rss) / 1024}))


def run(mode, n, a):
    cmd = [sys.executable, __file__, "--op", a.op, "--worker", mode, "--n", str(n),
           "--threads", str(a.threads),
           "--heads", str(a.heads), "--d", str(a.d), "--dv", str(a.dv), "--repeats", str(a.repeats)]
    # A dynamic mmap threshold would let glibc keep freed multi-MB buffers on the heap,
    # where an aligned reallocation may not reuse them: the peak would then grow with the
    # number of calls rather than with one call's working set.
    env = dict(os.environ)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--op", choices=sorted(DEFAULTS), default="dgsa")
    ap.add_argument("--n", type=int, nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--d", type=int)
    ap.add_argument("--dv", type=int)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--worker", choices=["eager", "fused"])
    a = ap.parse_args()
    for key, value in DEFAULTS[a.op].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.worker:
        worker(a.op, a.worker, a.n[0], a.threads, a.heads, a.d, a.dv, a.repeats)
        return
    dims = f"D={a.d}" if a.op == "gdla" else f"d={a.d}, dv={a.dv}"
    print(f"{a.op}_attention CPU, batch 1, {a.heads} heads, {dims}, "
          f"{a.threads} threads, median of {a.repeats}")
    print("| N | eager ms | fused ms | fused speed-up | eager extra RSS MB | fused extra RSS MB "
          "| memory ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in a.n:
        e, f = run("eager", n, a), run("fused", n, a)
        ratio = (f"{e['extra_rss_mb'] / f['extra_rss_mb']:.1f}x" if f["extra_rss_mb"] >= 0.1
                 else "n/a")
        print(f"| {n} | {e['ms']:.2f} | {f['ms']:.2f} | {e['ms'] / f['ms']:.2f}x | "
              f"{e['extra_rss_mb']:.1f} | {f['extra_rss_mb']:.1f} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
