#!/usr/bin/env python3
"""The first requests after a model loads, with and without the server's warm-up
(--warm_up, server/tasks/instance_warm_up.h), side by side in one run.

For each of --models: the server (pinned to --server-cores, one Torch thread) on a
repository holding only that model, started --rounds times with --warm_up=false and with
--warm_up=true in turn; once it serves, one client (this process, pinned to --client-cores)
sends single-image (or single-text) KServe requests one after another over HTTP and times
each. Prints per model and setting: the latency of the 1st, 2nd and 3rd request, the median
of requests 11-30 (warm), how long the 1st request waited in the model's queue (the
server's gatescope_queue_duration_seconds, read between the 1st and 2nd request, which
puts a scrape of /metrics before the 2nd), and how long the server took from start until
it served. GATESCOPE_BUILD_DIR selects the build whose server runs (default ./build), for
comparing two builds.

Usage: /usr/bin/python3 benchmarks/bench_warm_up.py [--models vit_fmnist,...]
       [--rounds 2] [--server-cores 0] [--client-cores 1]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(ROOT / "models"))

from bench_serving import text_inputs, write_inputs  # noqa: E402
from gatescope_client.client import Client  # noqa: E402
from server_harness import start_server, stop_server  # noqa: E402

def request_items(model, tmp):
    """The model's KServe input name and its examples, encoded: the inputs
    benchmarks/bench_serving.py sends it (held-out texts for text models)."""
    from gatescope.export.archive import read_metadata
    task = read_metadata(ROOT / "model_repository" / model / "1" / "model.pt")["task"]
    if task == "text_classification":
        paths, _ = text_inputs(model, tmp / "inputs")
        return "text", [pathlib.Path(p).read_text(encoding="utf-8").encode() for p in paths]
    return "input", [pathlib.Path(p).read_bytes() for p in write_inputs(task, tmp / "inputs")]


def queued_seconds(srv, model):
    """The server's gatescope_queue_duration_seconds_sum over `model`'s series: how long its
    requests have waited in the model's queue in all."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics",
                                  timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("gatescope_queue_duration_seconds_sum{")
               and f'model="{model}"' in line)


def first_requests(model, repo, extra, wrap, items, input_name, tmp):
    t0 = time.perf_counter()
    srv = start_server(tmp, repo, extra=["--torch_threads=1", *extra], wrap=wrap)
    started = time.perf_counter() - t0
    try:
        client = Client(f"http://127.0.0.1:{srv.http_port}", timeout=120)
        times = []
        for i in range(30):
            item = items[i % len(items)]
            t = time.perf_counter()
            client.infer(model, {input_name: np.array([item], dtype=object)})
            times.append(1e3 * (time.perf_counter() - t))
            if i == 0:
                first_queued = queued_seconds(srv, model)
    finally:
        stop_server(srv)
    return {"first": times[:3], "warm": statistics.median(times[10:]), "start_s": started,
            "first_queued_ms": 1e3 * first_queued}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vit_fmnist,dgvit_fmnist,dgt_wordnet,pvt_gdla_colin27,"
                                        "plug_detr_scenes")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    args = ap.parse_args()
    os.sched_setaffinity(0, {int(c) for c in args.client_cores.split(",")})
    wrap = ["taskset", "-c", args.server_cores]
    print(f"Server on cores {args.server_cores} (one Torch thread), client on "
          f"{args.client_cores}; single-example KServe requests over HTTP, one at a time\n")
    print("| model | --warm_up | 1st request ms | 2nd | 3rd | warm median ms | 1st queued ms | "
          "start to serving s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models.split(","):
        with tempfile.TemporaryDirectory() as d:
            tmp = pathlib.Path(d)
            repo = tmp / "repo"
            repo.mkdir()
            shutil.copytree(ROOT / "model_repository" / model, repo / model)
            input_name, items = request_items(model, tmp)
            for r in range(args.rounds):
                for warm in ("false", "true"):
                    run = tmp / f"run_{r}_{warm}"
                    run.mkdir()
                    got = first_requests(model, repo, [f"--warm_up={warm}"], wrap, items,
                                         input_name, run)
                    first = " | ".join(f"{t:.1f}" for t in got["first"])
                    print(f"| {model} | {warm} | {first} | {got['warm']:.1f} | "
                          f"{got['first_queued_ms']:.2f} | {got['start_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
