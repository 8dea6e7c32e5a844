#!/usr/bin/env python3
"""Serving throughput of the shipped DGViT: dynamic batching vs none, side by side.

Starts gatescope-server twice on loopback — once with batching off (max_batch_size 1) and
once with dynamic batching (max_batch_size 64, --max_queue_delay_us) — and drives each with
gatescope-perf at concurrency 1, 8, 32 and 64 (the load generator runs on the same machine).
Also measures the model's in-process batched forward (batch 64, TorchScript, same threads,
under the server's allocator: jemalloc as server/allocator.cc configures it) so the server's
own overhead shows as a fraction. Prints one markdown table.

Usage: /usr/bin/python3 benchmarks/bench_serving.py [--threads 2] [--delay-us 2000]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code, not installed


def in_process_throughput(threads, batch=64, seconds=4.0):
    import numpy as np
    import torch
    from gatescope import ops
    from gatescope.data import fashion_mnist
    torch.set_num_threads(threads)
    ops.load()
    model = torch.jit.load(str(ROOT / "model_repository" / "dgvit_fmnist" / "1" / "model.pt"))
    images, _ = fashion_mnist.load_split("t10k")
    x = torch.from_numpy(images[:batch].astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - fashion_mnist.MEAN) / fashion_mnist.STD
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            model(x)
            n += batch
    return n / (time.perf_counter() - t0)


def run_perf(server, levels, inputs, window_ms):
    cmd = [str(BUILD / "client" / "gatescope-perf"), "--server", server.address, "--model",
           "dgvit_fmnist", "--concurrency-range", f"{levels}", "--warmup-ms", "2000",
           "--window-ms", str(window_ms), "--max-windows", "8", *inputs]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def under_the_server_s_allocator():
    """Re-executes this script with jemalloc preloaded and configured as the server configures
    it (server/allocator.cc), so that the in-process ceiling and the server allocate alike;
    returns when that is already so."""
    import os
    from bench_allocators import ALLOCATORS  # this directory: sys.path[0] of a script
    server = ALLOCATORS["jemalloc-server"]
    if server["LD_PRELOAD"] in os.environ.get("LD_PRELOAD", ""):
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], dict(os.environ, **server))


def main():
    under_the_server_s_allocator()
    from server_harness import start_server, stop_server
    from gatescope.data.fashion_mnist import write_pngs
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--window-ms", type=int, default=2000)
    ap.add_argument("--instances", type=int, default=1, help="model instances, both configs")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gatescope_bench_"))
    inputs = [str(p) for p, _ in write_pngs(tmp / "png", start=9000, count=64)]
    configs = {
        "unbatched": ["--max_batch_size=1", f"--instances={args.instances}"],
        "dynamic": ["--max_batch_size=64", f"--max_queue_delay_us={args.delay_us}",
                    f"--instances={args.instances}"],
    }
    results = {}
    # In-process forward measured before, between and after the server runs (the median
    # is used; the spread shows how noisy this machine is).
    forwards = [in_process_throughput(args.threads)]
    for name, flags in configs.items():
        (tmp / name).mkdir()
        server = start_server(tmp / name, ROOT / "model_repository",
                              extra=[*flags, f"--torch_threads={args.threads}"])
        try:
            rows = []
            for c in (1, 8, 32, 64):
                rows += run_perf(server, f"{c}:{c}:1", inputs, args.window_ms)
            results[name] = {r["concurrency"]: r for r in rows}
        finally:
            stop_server(server)
        forwards.append(in_process_throughput(args.threads))
    forward = sorted(forwards)[1]
    print(f"DGViT (dgvit_fmnist), PNG 28x28 over gRPC loopback, {args.threads} Torch "
          f"thread(s), {args.instances} instance(s); dynamic = max_batch_size 64, "
          f"max_queue_delay {args.delay_us} us")
    print("| concurrency | unbatched req/s | dynamic req/s | dynamic / unbatched "
          "| unbatched p99 ms | dynamic p99 ms | errors |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for c in (1, 8, 32, 64):
        u, d = results["unbatched"][c], results["dynamic"][c]
        errors = sum(u["errors"].values()) + sum(d["errors"].values())
        stable = "" if u["stable"] and d["stable"] else " (not stable)"
        print(f"| {c} | {u['throughput']:.0f} | {d['throughput']:.0f} | "
              f"{d['throughput'] / u['throughput']:.2f}x{stable} | {u['p99_us'] / 1000:.2f} | "
              f"{d['p99_us'] / 1000:.2f} | {errors} |")
    d64 = results["dynamic"][64]["throughput"]
    print(f"\nIn-process batched forward (batch 64, TorchScript), median of 3: {forward:.0f} "
          f"images/s (runs: {', '.join(f'{f:.0f}' for f in forwards)}); server at "
          f"concurrency 64 reaches {d64:.0f} req/s = {100 * d64 / forward:.0f} % of it.")


if __name__ == "__main__":
    main()
