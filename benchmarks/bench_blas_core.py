#!/usr/bin/env python3
"""OpenBLAS's own kernels against the ones gatescope-server forces, for every shipped model.

On a CPU that Debian 12's OpenBLAS (0.3.21) does not know, the library takes its generic
SSE3 kernels (Prescott) and gatescope-server re-executes itself with OPENBLAS_CORETYPE set
to the widest kernels the CPU runs (server/app/blas_core.h). This measures what that
changes, side by side in one run, for every shipped model (or --models):

1. in-process: two forward workers (benchmarks/bench_serving_paired.py's, the server's
   allocator, --threads Torch threads) pinned to --server-cores, one loading OpenBLAS with
   OPENBLAS_CORETYPE set to what OpenBLAS detects by itself, one with the server's choice;
   at batch 1 and at the model's served max_batch_size, --pairs pairs of --slot-seconds
   slots taking turns (own choice first, then the server's first, ...);
2. served: two servers on a repository of that model alone, both pinned to --server-cores
   with dynamic batching as shipped, one started with OPENBLAS_CORETYPE set to OpenBLAS's
   own choice and one as users start it (the server chooses), each loaded in turn by
   gatescope-perf on --client-cores at concurrency 2 x max_batch_size (at most 128).

Prints per model and row the median rate of each side and the median of the per-pair
ratios (server's choice / OpenBLAS's own). On a CPU where OpenBLAS's choice stands (the
server forces nothing) it says so and exits 0; with OPENBLAS_CORETYPE already set it
refuses (both sides would load the same kernels).

Usage: PYTHONPATH=models:client/python /usr/bin/python3 benchmarks/bench_blas_core.py
       [--models vit_fmnist,...] [--server-cores 0] [--client-cores 1] [--threads 1]
       [--pairs 6] [--slot-seconds 0.6]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_serving import (model_inputs, run_perf, served_batching,  # noqa: E402
                           shipped_models)
from bench_serving_paired import ForwardWorker, take_turns  # noqa: E402


def row(what, pairs):
    own = statistics.median(a for a, _ in pairs)
    server = statistics.median(b for _, b in pairs)
    ratio = statistics.median(b / a for a, b in pairs)
    print(f"| {what} | {own:.1f} | {server:.1f} | {ratio:.2f}x |", flush=True)
    return ratio


def measure_model(model, args, detected, better, tmp):
    from gatescope import blas_core
    from server_harness import start_server, stop_server
    path = ROOT / "model_repository" / model / "1" / "model.pt"
    inputs, tokens = model_inputs(model, tmp / model / "inputs")
    repo = tmp / model / "repo"
    shutil.copytree(ROOT / "model_repository" / model, repo / model)
    own_env = {blas_core.VARIABLE: detected}
    workers = [ForwardWorker(path, args.server_cores, args.threads, tokens, blas_env=env)
               for env in (own_env, {blas_core.VARIABLE: better})]
    ratios = {}
    print(f"\n### {model}\n\n| what | OpenBLAS's own ({detected}) | the server's "
          f"({better}) | ratio |\n| --- | --- | --- | --- |")
    try:
        model_max = workers[0].meta["max_batch_size"]
        batch = served_batching(ROOT / "model_repository" / model, model_max, 1000)[0]
        for b in sorted({1, batch}):
            pairs = take_turns(args.pairs,
                               *(lambda w=w: w.rate(b, args.slot_seconds)["images_per_s"]
                                 for w in workers))
            unit = "texts" if tokens else "images"
            ratios[f"b{b}"] = row(f"in-process batch {b}, {unit}/s", pairs)
    finally:
        for w in workers:
            w.close()
    servers = []
    try:
        for name, env in (("own", own_env), ("server", {})):
            work = tmp / model / name
            work.mkdir()
            servers.append(start_server(
                work, repo, extra=[f"--torch_threads={args.threads}", "--instances=1"],
                env=env, wrap=["taskset", "-c", args.server_cores]))
        concurrency = min(128, 2 * batch)
        window_ms = max(1, int(args.slot_seconds * 1000 / 3))

        def served(server):
            r = run_perf(server.address, model, args.client_cores, concurrency, inputs,
                         window_ms, warmup_ms=300, max_windows=3, stability=1)
            if sum(r["errors"].values()):
                raise RuntimeError(f"{model}: failed requests {r['errors']}")
            return r["throughput"]

        for s in servers:
            served(s)  # warm-up
        pairs = take_turns(args.pairs, *(lambda s=s: served(s) for s in servers))
        ratios["served"] = row(f"served, dynamic batching, concurrency {concurrency}, "
                               "requests/s", pairs)
    finally:
        for s in servers:
            stop_server(s)
    return ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated; default: every shipped model")
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--slot-seconds", type=float, default=0.6)
    args = ap.parse_args()
    from gatescope import blas_core
    if blas_core.VARIABLE in os.environ:
        sys.exit(f"{blas_core.VARIABLE} is set: both sides would load the same kernels")
    detected = blas_core.detected_core()
    better = blas_core.better_core(detected, blas_core.cpu_flags()) if detected else None
    if not better:
        print(f"OpenBLAS's own choice stands on this CPU ({detected or 'not OpenBLAS'}): "
              "the server forces nothing, so there is nothing to compare")
        return 0
    models = args.models.split(",") if args.models else shipped_models()
    print(f"OpenBLAS chose {detected} on this CPU; the server forces {better}. Server and "
          f"workers on cores {args.server_cores}, gatescope-perf on {args.client_cores}, "
          f"{args.threads} Torch thread(s); {args.pairs} pairs of {args.slot_seconds:g} s "
          "slots per row; medians")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gatescope_blas_"))
    summary = []
    try:
        for model in models:
            summary.append((model, measure_model(model, args, detected, better, tmp)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| model | in-process batch 1 | in-process max_batch_size | served, dynamic |"
          "\n| --- | --- | --- | --- |")
    for model, r in summary:
        batched = [v for k, v in r.items() if k not in ("b1", "served")]
        print(f"| {model} | {r['b1']:.2f}x | "
              f"{(batched[0] if batched else r['b1']):.2f}x | {r['served']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
