#!/usr/bin/env python3
"""The server's throughput against the model's own, measured in alternating short slots.

benchmarks/bench_serving.py measures a model's in-process forward once and then serves it
for about a minute, so its ratios assume the machine keeps one speed for that minute. A
shared VM does not: on the 2-vCPU CI-class VM the same in-process forward has run at 700 and
at 1,300 images/s a few seconds apart (docs/benchmarks.md, "Paired slots on a VM whose speed
moves"), and bench_serving's ratios moved from 45 % to 149 % between rounds. This benchmark
asks the same questions with the drift taken out:

- the model's in-process forward runs in a worker process that stays loaded for the whole
  run (TorchScript, the tuner's random inputs and timing loop, the server's jemalloc
  configuration, --threads Torch threads), pinned to the server's forward cores;
- the server runs beside it on a repository of that model alone, pinned as in
  bench_serving.py (first unbatched: a copy of the model without its config.pbtxt and
  --max_batch_size=1; then with dynamic batching as shipped), loaded by gatescope-perf on
  --client-cores;
- the two take turns, one --slot-seconds slot each, in the order in-process, served, served,
  in-process, in-process, served, ... (so a steady drift favours neither side), while the
  other side waits idle (the worker blocked on its pipe, the server with no calls);
- every served slot is divided by the in-process slot next to it (its pair): unbatched
  requests/s at concurrency 8 against the batch-1 forward, dynamic requests/s at concurrency
  2 x max_batch_size (at most 128) against the faster of the two best batch sizes up to the
  served max_batch_size (found by a sweep of every batch size at the start, each size timed
  on the way up and again on the way down);
- with --client-batch N (KServe APIs only), a third mode: the same shipped server called
  with N inputs per request (gatescope-perf --batch-size N, as a client that batches
  itself) at the concurrency that keeps as many examples in flight as dynamic does (2 x
  max_batch_size / N, at least 2), its inferences/s against the same in-process ceiling as
  dynamic.

Prints per model every pair, then the median ratio with its quartiles, the pooled ratio
(all served requests over all in-process images), and how far the in-process rate itself
moved (fastest / slowest slot): a narrow quartile range with a wide in-process spread is
the drift taken out; a wide quartile range means the VM moved within a slot.

Usage: /usr/bin/python3 benchmarks/bench_serving_paired.py [--models vit_fmnist,...]
       [--server-cores 0] [--forward-cpus ""] [--client-cores 1] [--threads 1]
       [--pairs 8] [--slot-seconds 1.0] [--delay-us 1000]
       [--transport tcp|unix] [--api gatescope|kserve|kserve-streaming|rest]
       [--client-batch N]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_serving import (APIS, TRANSPORTS, add_client_arguments,  # noqa: E402
                           add_placement_arguments, check_client_arguments, model_inputs,
                           run_perf, served_batching, shipped_models, start_pinned_server)

WARMUP_MS = 300  # gatescope-perf's warm-up in each served slot: its connections and threads


class ForwardWorker:
    """The model's in-process forward in a process of its own, pinned to `cores` under the
    server's allocator and OpenBLAS kernels; `rate(batch, seconds)` times one slot. Owned by
    one thread."""

    def __init__(self, path, cores, threads, tokens, blas_env=None):
        """`blas_env`: OpenBLAS's variables for the worker (default: the server's choice)."""
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_allocators import ALLOCATORS
        from gatescope import blas_core
        env = dict(os.environ, **ALLOCATORS["jemalloc-server"],
                   **(blas_core.server_environment() if blas_env is None else blas_env))
        self.proc = subprocess.Popen(
            ["taskset", "-c", cores, sys.executable, str(pathlib.Path(__file__).resolve()),
             "--forward-worker", str(path), "--threads", str(threads),
             "--text-tokens", str(tokens)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.meta = self._answer()

    def _answer(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"forward worker exited with {self.proc.wait()}")
        return json.loads(line)

    def rate(self, batch, seconds):
        """The tuner's summary of `batch`'s forward timed for `seconds` (images_per_s, ...)."""
        self.proc.stdin.write(f"{batch} {seconds}\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def forward_worker(path, threads, tokens):
    """The worker's side: prints the model's metadata, then for each "BATCH SECONDS" line on
    stdin one JSON summary of that batch's forward (scripts/gatescope_tune.py's timing)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import torch
    from gatescope import ops
    from gatescope_tune import example_inputs, jemalloc_mapped, load_model, time_forward
    if not jemalloc_mapped():
        sys.exit("forward worker: jemalloc is not mapped although it was preloaded")
    torch.set_num_threads(threads)
    ops.load()
    model, meta, tokens, vocab_size = load_model(path, tokens)
    torch.manual_seed(0)
    inputs = {}
    print(json.dumps({"max_batch_size": meta.get("max_batch_size") or 128, "task": meta["task"],
                      "text_tokens": tokens}), flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            batch, seconds = line.split()
            batch, seconds = int(batch), float(seconds)
            if batch not in inputs:
                inputs[batch] = example_inputs(meta, batch, tokens, vocab_size)
            summary, _ = time_forward(model, inputs[batch], batch, seconds)
            print(json.dumps(summary), flush=True)


def sweep_batches(worker, batches, seconds):
    """The summary of each batch size's forward, timed twice (every size in ascending order,
    then in descending order, so that a steady drift weighs on every size alike) with the
    mean of the two rates."""
    up = [worker.rate(b, seconds) for b in batches]
    down = {b: worker.rate(b, seconds)["images_per_s"] for b in reversed(batches)}
    return [dict(s, images_per_s=(s["images_per_s"] + down[s["batch"]]) / 2) for s in up]


def served_slot(address, model, args, concurrency, inputs, batch_size=1):
    """gatescope-perf for about one slot: a short warm-up, then three windows reported
    together; the result row (`batch_size` inputs per request)."""
    window_ms = max(1, int(args.slot_seconds * 1000 / 3))
    return run_perf(address, model, args.client_cores, concurrency, inputs, window_ms,
                    args.api, warmup_ms=WARMUP_MS, max_windows=3, stability=1,
                    batch_size=batch_size)


def take_turns(pairs, first, second):
    """[(first(), second())] for `pairs` rounds, `first` called first in even rounds and
    `second` in odd ones, so that a steady drift favours neither."""
    out = []
    for i in range(pairs):
        if i % 2 == 0:
            a = first()
            b = second()
        else:
            b = second()
            a = first()
        out.append((a, b))
    return out


def alternate(pairs, in_process, served, rate="throughput"):
    """Runs `pairs` (in-process, served) pairs in the order C S, S C, C S, ... and returns
    [(in-process value, served value, served row)]; `in_process()` returns a rate, `served()`
    a gatescope-perf row, whose `rate` field is the served value (requests/s by default;
    "inferences_per_s" for requests of several inputs)."""
    return [(c, row[rate], row) for c, row in take_turns(pairs, in_process, served)]


def ratio_summary(pairs):
    """{median, q1, q3, pooled, spread} of the served / in-process ratios of `pairs`."""
    ratios = sorted(s / c for c, s, _ in pairs)
    q1, _, q3 = (statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1
                 else (ratios[0],) * 3)
    cs = [c for c, _, _ in pairs]
    return {"median": statistics.median(ratios), "q1": q1, "q3": q3,
            "pooled": sum(s for _, s, _ in pairs) / sum(cs), "spread": max(cs) / min(cs)}


def errors_of(row):
    return sum(row["errors"].values())


def print_pairs(name, what_c, what_s, pairs):
    print(f"\n{name}: | pair | {what_c} /s | {what_s}/s | ratio |")
    for i, (c, s, row) in enumerate(pairs):
        note = f" ({errors_of(row)} errors)" if errors_of(row) else ""
        print(f"| {i + 1} | {c:.1f} | {s:.1f}{note} | {100 * s / c:.0f} % |")
    r = ratio_summary(pairs)
    print(f"{name}: median {100 * r['median']:.0f} % (quartiles {100 * r['q1']:.0f} - "
          f"{100 * r['q3']:.0f} %), pooled {100 * r['pooled']:.0f} %; in-process fastest / "
          f"slowest slot {r['spread']:.2f}x")
    return r


def measure_model(model, args, tmp):
    from server_harness import stop_server
    path = ROOT / "model_repository" / model / "1" / "model.pt"
    inputs, tokens = model_inputs(model, tmp / model / "inputs")
    # Repositories of this model alone (a copy, as shipped, and a copy without its
    # config.pbtxt, so nothing batches): no other model loads or warms up beside the slots.
    shipped, bare = tmp / model / "shipped", tmp / model / "bare"
    shutil.copytree(ROOT / "model_repository" / model, shipped / model)
    shutil.copytree(ROOT / "model_repository" / model, bare / model,
                    ignore=shutil.ignore_patterns("config.pbtxt"))
    worker = ForwardWorker(path, args.forward_cpus or args.server_cores, args.threads, tokens)
    failed = 0
    try:
        sys.path.insert(0, str(ROOT / "scripts"))
        from gatescope_tune import default_batches
        model_max = worker.meta["max_batch_size"]
        sweep = sweep_batches(worker, default_batches(model_max), args.slot_seconds)
        batch, delay_us, source = served_batching(ROOT / "model_repository" / model,
                                                  max(s["batch"] for s in sweep), args.delay_us)
        best = sorted((s for s in sweep if s["batch"] <= batch),
                      key=lambda s: -s["images_per_s"])[:2]
        print(f"\n### {model}\n\nIn-process sweep: " + ", ".join(
            f"b{s['batch']} {s['images_per_s']:.1f}/s" for s in sweep))
        print(f"dynamic = max_batch_size {batch}, max_queue_delay {delay_us} us ({source}); "
              f"its in-process ceiling per slot: the faster of b{best[0]['batch']}"
              + (f" and b{best[1]['batch']}" if len(best) > 1 else ""))

        def ceiling():
            return max(worker.rate(s["batch"], args.slot_seconds / len(best))["images_per_s"]
                       for s in best)

        dynamic = [f"--max_batch_size={model_max}", f"--max_queue_delay_us={args.delay_us}"]
        modes = [("unbatched", bare, ["--max_batch_size=1"], 8, 1,
                  lambda: worker.rate(1, args.slot_seconds)["images_per_s"]),
                 ("dynamic", shipped, dynamic, min(128, 2 * batch), 1, ceiling)]
        if args.client_batch:
            # As many examples in flight as the dynamic mode keeps (two batches' worth), so
            # a batch waits queued while one runs; at least two calls.
            per_call = min(args.client_batch, model_max)
            modes.append(("client batches", shipped, dynamic,
                          max(2, -(-min(128, 2 * batch) // per_call)), per_call, ceiling))
        results = {}
        for mode, repo, flags, concurrency, per_request, in_process in modes:
            server, address = start_pinned_server(repo, flags, args,
                                                  tmp / model / mode.replace(" ", "_"))
            served = lambda: served_slot(address, model, args, concurrency, inputs,  # noqa: E731
                                         per_request)
            try:
                served()  # warms the server
                pairs = alternate(args.pairs, in_process, served,
                                  "inferences_per_s" if per_request > 1 else "throughput")
            finally:
                stop_server(server)
            failed += sum(errors_of(row) for _, _, row in pairs)
            results[mode] = print_pairs(
                f"{mode} (concurrency {concurrency}"
                + (f", {per_request} inputs per request)" if per_request > 1 else ")"),
                "in-process b1" if mode == "unbatched" else "in-process best",
                "served req" if per_request == 1 else "served inferences", pairs)
    finally:
        worker.close()
    return results, failed


def cell(r):
    return (f"{100 * r['median']:.0f} % ({100 * r['q1']:.0f} - {100 * r['q3']:.0f}); "
            f"{100 * r['pooled']:.0f} %; {r['spread']:.2f}x")


def main():
    if "--forward-worker" in sys.argv:
        w = argparse.ArgumentParser()
        w.add_argument("--forward-worker", type=pathlib.Path)
        w.add_argument("--threads", type=int)
        w.add_argument("--text-tokens", type=int)
        a = w.parse_args()
        forward_worker(a.forward_worker, a.threads, a.text_tokens)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_placement_arguments(ap)
    ap.add_argument("--pairs", type=int, default=8,
                    help="in-process / served pairs per model and batching mode")
    ap.add_argument("--slot-seconds", type=float, default=1.0,
                    help="length of each slot (and of each batch size of the sweep)")
    ap.add_argument("--delay-us", type=int, default=1000,
                    help="batching delay of a model without config.pbtxt")
    ap.add_argument("--client-batch", type=int, default=0,
                    help="also serve requests of N inputs each (at most the model's "
                         "max_batch_size; KServe APIs only); 0: not")
    add_client_arguments(ap)
    args = ap.parse_args()
    check_client_arguments(ap, args)
    if args.client_batch < 0 or (args.client_batch > 1 and args.api == "gatescope"):
        ap.error("--client-batch wants N >= 0, and above 1 a KServe API (--api kserve, "
                 "kserve-streaming or rest): gatescope.v1 Predict takes one input")
    if args.pairs < 1 or args.slot_seconds <= 0:
        ap.error("--pairs must be at least 1 and --slot-seconds positive")
    models = args.models.split(",") if args.models else shipped_models()
    forward_cores = args.forward_cpus or args.server_cores
    print(f"Server on cores {args.server_cores}, gatescope-perf on cores {args.client_cores}, "
          f"in-process forward on cores {forward_cores}, {args.threads} Torch thread(s), "
          f"1 instance; {APIS[args.api]} over {TRANSPORTS[args.transport]}; {args.pairs} "
          f"pairs of {args.slot_seconds:g} s slots per model and mode")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gatescope_paired_"))
    summary, failed = [], 0
    try:
        for model in models:
            results, errors = measure_model(model, args, tmp)
            summary.append((model, results))
            failed += errors
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nEach cell: median served / in-process ratio over the pairs (quartiles); pooled "
          "ratio; in-process fastest / slowest slot\n")
    batches = " | client batches / in-process best" if args.client_batch else ""
    print(f"| model | unbatched / in-process b1 | dynamic / in-process best{batches} |")
    print("| --- | --- | --- |" + (" --- |" if args.client_batch else ""))
    for model, r in summary:
        extra = f" {cell(r['client batches'])} |" if args.client_batch else ""
        print(f"| {model} | {cell(r['unbatched'])} | {cell(r['dynamic'])} |{extra}")
    if failed:
        print(f"\n{failed} served requests failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
