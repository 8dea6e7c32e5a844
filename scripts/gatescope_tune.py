#!/usr/bin/env python3
"""Chooses each model's batching knobs (config.pbtxt) from its measured forward latency.

For each model (default: every model directory of the repository with a <version>/model.pt;
its highest numeric version), the script times the TorchScript forward pass in-process at
each batch size, on random inputs of the model's declared shape (`gatescope.json`; models
with any_size take that shape too; text models: rows of --text-tokens random piece ids, by
default the model's max_tokens, the longest call the server forms, every piece visible),
under the server's allocator (it re-executes itself with
jemalloc configured as server/allocator.cc configures it), pinned to --cores with
--torch-threads Torch threads. Per batch size it records every forward's latency and reports
per-image throughput and the p50 and p99 (nearest rank) of the forward latency.

The rule (docs/performance.md, "Batching knobs from measurement"), with B the --p99-ms bound:

- Under saturation a request may wait for the batch being executed, then its own batch, plus
  the queue delay: worst case delay + 2 * p99(b). The delay below never exceeds what that
  leaves, so batch size b is a candidate when 2 * p99(b) <= B.
- max_batch_size: the smallest candidate whose throughput is within 5 % of the best
  candidate's (batches past the knee only add latency). preferred_batch_size: [that size].
- max_queue_delay_microseconds: min(p50(1) / 2, B - 2 * p99(chosen)), at least 0, with
  p50(1) the median forward of the smallest measured batch (batch 1 by default); the first
  term rounded to the nearest 100 us, the second down to a multiple of 100 us (so the bound
  still holds). Under load batches fill while the instance is busy, so the delay matters
  only at low load, where it is pure added latency: half of a request's own forward lets a
  few requests join at moderate load and costs a lone request at most half again.
- If no measured batch size is a candidate (batch 1 already misses the bound), the model
  gets no choice: the script names it and its p99 on stderr and exits with status 1 (after
  the other models).

Prints a table per model and the choice (or, with --json, one JSON line per model with every
forward's latency, the summaries and the choice). With --write it writes
<repository>/<model>/config.pbtxt: an existing file keeps every other field it has (e.g.
instance_group; its comments are replaced), the three fields are set, and comment lines at the
top record the tool, date, machine, bound and the measured table.

Usage: /usr/bin/python3 scripts/gatescope_tune.py [--models dgvit_fmnist,...]
       [--p99-ms 100] [--cores 0] [--torch-threads 1] [--seconds 1.0] [--batches 1,2,4]
       [--text-tokens N] [--write] [--json]
"""
import argparse
import datetime
import importlib
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KNEE = 0.95        # "within 5 % of the best candidate's throughput"
WARMUP_CALLS = 3   # per batch size, not timed
MIN_CALLS = 5      # timed calls per batch size, however short --seconds is


class BoundMissed(Exception):
    """No measured batch size fits the latency bound."""


# ---- the choice: pure, on summaries {batch, images_per_s, p50_ms, p99_ms} ----

def choose(model, measurements, p99_bound_ms):
    """Returns {max_batch_size, preferred_batch_size, max_queue_delay_microseconds,
    candidates} for `measurements` (one summary per batch size) under the rule of the module
    docstring; raises BoundMissed naming `model` when no batch size is a candidate."""
    rows = sorted(measurements, key=lambda m: m["batch"])
    candidates = [m for m in rows if 2 * m["p99_ms"] <= p99_bound_ms]
    if not candidates:
        first = rows[0]
        raise BoundMissed(
            f"{model}: batch {first['batch']} already misses the p99 bound of {p99_bound_ms:g} "
            f"ms: its p99 forward is {first['p99_ms']:.3f} ms, and a request may wait for a "
            f"running batch and then its own (2 x p99 = {2 * first['p99_ms']:.3f} ms)")
    best = max(m["images_per_s"] for m in candidates)
    chosen = next(m for m in candidates if m["images_per_s"] >= KNEE * best)
    half_forward_us = round(rows[0]["p50_ms"] * 1000 / 2 / 100) * 100
    # In whole 100 us units; round() first so that float error cannot cost a unit.
    budget_us = math.floor(round((p99_bound_ms - 2 * chosen["p99_ms"]) * 10, 6)) * 100
    return {"max_batch_size": chosen["batch"],
            "preferred_batch_size": [chosen["batch"]],
            "max_queue_delay_microseconds": max(0, min(half_forward_us, budget_us)),
            "candidates": [m["batch"] for m in candidates]}


def percentile(values, q):
    """Nearest-rank q-quantile (0 < q <= 1) of `values`: an observed value, never below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# ---- measurement ----

def under_the_server_s_allocator():
    """Re-executes this script with jemalloc preloaded and configured as the server
    configures it (the `jemalloc-server` entry of benchmarks/bench_allocators.py), and with
    OpenBLAS's kernels as the server chooses them (gatescope.blas_core); returns when that
    is already so."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_allocators import ALLOCATORS
    from gatescope import blas_core
    server = dict(ALLOCATORS["jemalloc-server"], **blas_core.server_environment())
    if (server["LD_PRELOAD"] in os.environ.get("LD_PRELOAD", "")
            and os.environ.get("MALLOC_CONF") == server["MALLOC_CONF"]
            and blas_core.VARIABLE not in server):  # present only when not yet set
        return
    if not pathlib.Path(server["LD_PRELOAD"]).exists():
        sys.exit(f"{server['LD_PRELOAD']} not found: the server's allocator (libjemalloc2, "
                 "scripts/setup.sh) is needed to measure as the server runs")
    os.execve(sys.executable, [sys.executable, str(pathlib.Path(__file__).resolve()),
                               *sys.argv[1:]], dict(os.environ, **server))


def jemalloc_mapped():
    """Whether jemalloc really is mapped into this process (the preload took)."""
    from gatescope.process_maps import library_mapped
    return library_mapped("libjemalloc")


def model_file(repository, model):
    """<repository>/<model>/<highest numeric version>/model.pt, or None."""
    versions = [d for d in (repository / model).glob("*/model.pt")
                if d.parent.name.isdigit() and int(d.parent.name) > 0]
    return max(versions, key=lambda p: int(p.parent.name), default=None)


def default_batches(max_batch_size):
    """Powers of two up to the model's max_batch_size, and that size."""
    out = [1 << k for k in range(max_batch_size.bit_length()) if 1 << k <= max_batch_size]
    return out + ([max_batch_size] if out[-1] != max_batch_size else [])


def text_tokens(meta, asked):
    """The piece count a text model is measured at: `asked`, else its max_tokens."""
    most = meta["text"]["max_tokens"]
    if asked and not 1 <= asked <= most:
        sys.exit(f"{meta['name']}: --text-tokens {asked} outside [1, max_tokens {most}]")
    return asked or most


def example_inputs(meta, batch, tokens, vocab_size):
    """Random forward arguments for one batch: an image batch of the declared shape, or for
    text models `tokens` random piece ids per row (ids of the model's own vocabulary of
    `vocab_size`, never its pad id) with the attention mask all visible, as the server pads
    a call whose texts all have that many pieces."""
    import torch
    if meta["task"] != "text_classification":
        return (torch.randn(batch, *meta["input"]["shape"]),)
    ids = torch.randint(0, vocab_size - 1, (batch, tokens))
    ids += (ids >= meta["text"]["pad_id"]).long()  # every id but the pad id
    return ids, torch.ones(batch, tokens, dtype=torch.bool)


def vocabulary_size(path, meta):
    """The piece count of a text model's tokenizer (None for other models)."""
    if meta["task"] != "text_classification":
        return None
    from gatescope.text_tokenizer import Tokenizer
    return Tokenizer.from_archive(path, meta).vocab_size


def load_model(path, tokens=0):
    """(TorchScript module in eval mode, its gatescope.json metadata, the pieces per text row
    or None for an image model, its vocabulary size or None) for `path`; text models at
    `tokens` pieces per row (0: max_tokens)."""
    import torch
    files = {"gatescope.json": ""}
    model = torch.jit.load(str(path), _extra_files=files)
    model.eval()
    meta = json.loads(files["gatescope.json"])
    tokens = text_tokens(meta, tokens) if meta["task"] == "text_classification" else None
    return model, meta, tokens, vocabulary_size(path, meta)


def time_forward(model, x, batch, seconds):
    """Times `model(*x)` (a batch of `batch` rows) for at least `seconds` and MIN_CALLS calls,
    after WARMUP_CALLS untimed ones; the caller holds torch.inference_mode. Returns (summary,
    every forward's latency in ms)."""
    for _ in range(WARMUP_CALLS):
        model(*x)
    times = []
    start = time.perf_counter()
    while len(times) < MIN_CALLS or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        model(*x)
        times.append((time.perf_counter() - t0) * 1000)
    return ({"batch": batch, "images_per_s": batch * len(times) / (sum(times) / 1000),
             "p50_ms": percentile(times, 0.50), "p99_ms": percentile(times, 0.99),
             "forwards": len(times)}, times)


def measure(path, batches, seconds, tokens=0):
    """Times `path`'s forward at each batch size (None: default_batches of its own
    max_batch_size, else 128); text models at `tokens` pieces per row (0: max_tokens).
    Returns (summaries, per-batch forward latencies in ms, the pieces per text row or None
    for an image model)."""
    import torch
    model, meta, tokens, vocab_size = load_model(path, tokens)
    batches = batches or default_batches(meta.get("max_batch_size") or 128)
    torch.manual_seed(0)
    summaries, latencies = [], {}
    with torch.inference_mode():
        for batch in batches:
            summary, latencies[batch] = time_forward(
                model, example_inputs(meta, batch, tokens, vocab_size), batch, seconds)
            summaries.append(summary)
    return summaries, latencies, tokens


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def parse_cpu_list(text):
    """'0,2-3' -> {0, 2, 3} (taskset's CPU list syntax)."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpu_list(cpus):
    return ",".join(map(str, sorted(cpus)))


# ---- config.pbtxt ----

def serving_config_class(out_dir):
    """The generated gatescope.v1.ServingConfig class (protoc --python_out into out_dir; the
    generated gatescope.v1 package is grafted onto the models' `gatescope` package)."""
    subprocess.run(["protoc", f"--proto_path={ROOT / 'proto'}", f"--python_out={out_dir}",
                    "inference/model_config.proto", "gatescope/v1/model_config.proto"],
                   check=True)
    sys.path.insert(0, str(out_dir))
    import gatescope
    gatescope.__path__.append(str(pathlib.Path(out_dir) / "gatescope"))
    return importlib.import_module("gatescope.v1.model_config_pb2").ServingConfig


def table_lines(summaries, choice_or_none, unit="images"):
    """The measured table, marking choose()'s candidates and choice (none: no candidate);
    `unit`: what a batch row is (images, texts)."""
    chosen = choice_or_none and choice_or_none["max_batch_size"]
    candidates = choice_or_none["candidates"] if choice_or_none else []
    lines = [f"{'batch':>6} {unit + '/s':>10} {'p50 ms':>9} {'p99 ms':>9}  candidate"]
    for m in summaries:
        fits = "yes" if m["batch"] in candidates else "no"
        lines.append(f"{m['batch']:>6} {m['images_per_s']:>10.1f} {m['p50_ms']:>9.3f} "
                     f"{m['p99_ms']:>9.3f}  {fits}{'  <- chosen' if m['batch'] == chosen else ''}")
    return lines


def write_config(path, config_class, choice, header):
    """Sets the three batching fields of `path` (created if absent; other fields kept) and
    writes it back with `header` as comment lines on top."""
    from google.protobuf import text_format
    config = config_class()
    if path.exists():
        text_format.Parse(path.read_text(), config)
    config.max_batch_size = choice["max_batch_size"]
    batching = config.dynamic_batching
    del batching.preferred_batch_size[:]
    batching.preferred_batch_size.extend(choice["preferred_batch_size"])
    batching.max_queue_delay_microseconds = choice["max_queue_delay_microseconds"]
    text = "".join(f"# {line}".rstrip() + "\n" for line in header)
    path.write_text(text + text_format.MessageToString(config))


# ---- command line ----

def main():
    under_the_server_s_allocator()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repository", type=pathlib.Path, default=ROOT / "model_repository",
                   help="model repository (default: this checkout's model_repository)")
    p.add_argument("--models", default="", help="comma-separated; default: every model")
    p.add_argument("--cores", default="", help="CPU list to pin to, e.g. 0 or 0-1 "
                   "(default: the current affinity)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--p99-ms", type=float, default=100.0, help="bound on a request's p99 "
                   "latency under saturation, in ms")
    p.add_argument("--seconds", type=float, default=1.0, help="timed seconds per batch size")
    p.add_argument("--batches", default="", help="comma-separated batch sizes (default: "
                   "powers of two up to the model's max_batch_size, and that size)")
    p.add_argument("--text-tokens", type=int, default=0, help="text models: pieces per row "
                   "(default: the model's max_tokens, the longest call the server forms)")
    p.add_argument("--write", action="store_true", help="write <model>/config.pbtxt")
    p.add_argument("--json", action="store_true", help="one JSON line per model")
    a = p.parse_args()

    if not jemalloc_mapped():
        sys.exit("jemalloc is not mapped into this process although it was preloaded")
    if a.cores:
        os.sched_setaffinity(0, parse_cpu_list(a.cores))
    cores = os.sched_getaffinity(0)
    import torch
    from gatescope import ops
    torch.set_num_threads(a.torch_threads)
    ops.load()

    repository = a.repository.resolve()
    names = a.models.split(",") if a.models else sorted(
        d.name for d in repository.iterdir() if d.is_dir() and model_file(repository, d.name))
    batches = [int(b) for b in a.batches.split(",")] if a.batches else None
    machine = f"{cpu_model()}, cores {cpu_list(cores)}, {a.torch_threads} Torch thread(s)"
    stubs = tempfile.TemporaryDirectory(prefix="gatescope_tune_") if a.write else None
    config_class = serving_config_class(stubs.name) if a.write else None
    failed = False
    for name in names:
        path = model_file(repository, name)
        if path is None:
            sys.exit(f"{name}: no <version>/model.pt under {repository / name}")
        summaries, latencies, tokens = measure(path, batches, a.seconds, a.text_tokens)
        unit = "texts" if tokens else "images"
        inputs = f" (texts of {tokens} pieces)" if tokens else ""
        try:
            choice, error = choose(name, summaries, a.p99_ms), None
        except BoundMissed as e:
            choice, error, failed = None, str(e), True
        header = [f"Written by scripts/gatescope_tune.py on "
                  f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
                  f"Machine: {machine}; jemalloc as the server configures it",
                  f"Bound: p99 {a.p99_ms:g} ms (rule: docs/performance.md, "
                  "\"Batching knobs from measurement\")",
                  f"Measured {name} version {path.parent.name}{inputs}, {a.seconds:g} s per "
                  "batch size:",
                  *table_lines(summaries, choice, unit)]
        written = None
        if choice and a.write:
            written = repository / name / "config.pbtxt"
            write_config(written, config_class, choice, header)
        if a.json:
            print(json.dumps({
                "model": name, "version": path.parent.name, "machine": cpu_model(),
                "cores": sorted(cores), "torch_threads": a.torch_threads,
                "p99_bound_ms": a.p99_ms, "seconds": a.seconds, "measurements": summaries,
                "text_tokens": tokens,
                "forward_ms": {str(b): [round(t, 4) for t in ts] for b, ts in latencies.items()},
                "choice": choice, "error": error,
                "config": str(written) if written else None}), flush=True)
        else:
            print(f"{name} (version {path.parent.name}){inputs}: p99 bound {a.p99_ms:g} ms; "
                  f"{machine}")
            print("\n".join(table_lines(summaries, choice, unit)))
            if choice:
                print(f"chosen: max_batch_size {choice['max_batch_size']}, "
                      f"preferred_batch_size {choice['preferred_batch_size']}, "
                      f"max_queue_delay_microseconds {choice['max_queue_delay_microseconds']}"
                      + (f"; written to {written}" if written else ""))
            print(flush=True)
        if error:
            print(error, file=sys.stderr, flush=True)
    if stubs:
        stubs.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
