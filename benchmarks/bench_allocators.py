#!/usr/bin/env python3
"""The model's own forward throughput by batch size under each allocator, side by side.

For every shipped model (or --models), one child /usr/bin/python3 per allocator, pinned to
one core (taskset) with one Torch thread, loads the TorchScript archive and times forward
passes on random inputs of the model's declared shape at each batch size. Allocators:

- glibc: malloc as Debian ships it. Its mmap threshold adapts, but blocks above 32 MiB are
  always mmap'ed and every free unmaps them, so each large intermediate tensor page-faults in
  afresh on every call;
- glibc-tuned: glibc with MALLOC_MMAP_THRESHOLD_=32 MiB (its maximum) and
  MALLOC_TRIM_THRESHOLD_=1 GiB, the best a mallopt policy can do;
- jemalloc: Debian's libjemalloc2 (LD_PRELOAD) as configured by default: freed pages go
  back to the system gradually over a decay time (10 s);
- jemalloc-server: jemalloc with the server's configuration (its malloc_conf in
  server/allocator.cc: decay off; the server returns unused memory on a period instead);
- tcmalloc: Debian's libtcmalloc-minimal4, when installed.

Prints per-image throughput (images/s) and minor page faults per forward pass at each batch
size up to the model's max_batch_size, each allocator's ratio to glibc at the largest batch,
and the peak RSS of each child. The server links jemalloc (server/CMakeLists.txt) because of
these numbers (docs/performance.md).

Usage: /usr/bin/python3 benchmarks/bench_allocators.py [--models dgvit_fmnist,...]
       [--batches 1,8,16,32,64,128] [--core 0] [--seconds 1.0]
"""
import argparse
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIB = pathlib.Path("/usr/lib/x86_64-linux-gnu")
# The configuration the server gives jemalloc (its malloc_conf, read from its source).
SERVER_CONF = re.search(r'malloc_conf = "([^"]*)"',
                        (ROOT / "server" / "allocator.cc").read_text()).group(1)
ALLOCATORS = {
    "glibc": {},
    "glibc-tuned": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                    "MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
    "jemalloc": {"LD_PRELOAD": str(LIB / "libjemalloc.so.2")},
    "jemalloc-server": {"LD_PRELOAD": str(LIB / "libjemalloc.so.2"), "MALLOC_CONF": SERVER_CONF},
    "tcmalloc": {"LD_PRELOAD": str(LIB / "libtcmalloc_minimal.so.4")},
}


def child(model_name, batches, seconds):
    """Runs in the pinned child: prints one JSON line {batch: images/s, ..., "rss_mib": x}."""
    import torch
    from gatescope import ops
    torch.set_num_threads(1)
    ops.load()
    files = {"gatescope.json": ""}
    model = torch.jit.load(str(ROOT / "model_repository" / model_name / "1" / "model.pt"),
                           _extra_files=files)
    model.eval()
    meta = json.loads(files["gatescope.json"])
    shape = meta["input"]["shape"]
    batches = [b for b in batches if b <= meta.get("max_batch_size", max(batches))]
    out = {}
    torch.manual_seed(0)
    with torch.inference_mode():
        for batch in batches:
            x = torch.randn(batch, *shape)
            model(x)
            faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            n, t0 = 0, time.perf_counter()
            while n < 2 or time.perf_counter() - t0 < seconds:
                model(x)
                n += 1
            out[str(batch)] = batch * n / (time.perf_counter() - t0)
            out[f"faults{batch}"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                                     - faults0) / n
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            out["rss_mib"] = int(line.split()[1]) / 1024
    print(json.dumps(out))


def run_child(allocator, model, batches, core, seconds):
    from gatescope import blas_core  # every allocator on OpenBLAS's kernels as the server's
    env = dict(os.environ, **ALLOCATORS[allocator], OMP_NUM_THREADS="1",
               **blas_core.server_environment())
    cmd = ["taskset", "-c", str(core), "/usr/bin/python3", __file__, "--child", model,
           "--batches", ",".join(map(str, batches)), "--seconds", str(seconds)]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="", help="comma-separated; default: every shipped model")
    p.add_argument("--batches", default="1,8,16,32,64,128")
    p.add_argument("--core", type=int, default=0)
    p.add_argument("--seconds", type=float, default=1.0, help="timed seconds per batch size")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    if a.child:
        return child(a.child, batches, a.seconds)
    models = a.models.split(",") if a.models else sorted(
        d.name for d in (ROOT / "model_repository").iterdir() if (d / "1" / "model.pt").exists())
    allocators = [n for n in ALLOCATORS
                  if "LD_PRELOAD" not in ALLOCATORS[n] or
                  pathlib.Path(ALLOCATORS[n]["LD_PRELOAD"]).exists()]
    print(f"core {a.core}, 1 Torch thread; images/s (page faults per forward) by batch size, "
          f"up to each model's max_batch_size; ratio: to glibc at the largest batch\n")
    print("| model | allocator | " + " | ".join(f"b{b}" for b in batches) +
          " | ratio | peak RSS MiB |")
    print("|---" * (len(batches) + 4) + "|")
    for model in models:
        results = {}
        for allocator in allocators:
            results[allocator] = r = run_child(allocator, model, batches, a.core, a.seconds)
            top = max(int(b) for b in r if b.isdigit())
            ratio = r[str(top)] / results["glibc"][str(top)]
            print(f"| {model} | {allocator} | " +
                  " | ".join(f"{r[str(b)]:.1f} ({r[f'faults{b}']:.0f})" if str(b) in r else "-"
                             for b in batches) +
                  f" | {ratio:.2f} | {r['rss_mib']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
