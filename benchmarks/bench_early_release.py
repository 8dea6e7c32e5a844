#!/usr/bin/env python3
"""Dynamic batching with and without early release (--early_batch_release), side by side in
one run: `--model` (default dgvit_fmnist) with its shipped config.pbtxt (max_batch_size and
max_queue_delay), server pinned to --server-cores with one Torch thread, gatescope-perf
pinned to --client-cores at each of --concurrency (closed loop: each sender sends its next
request when its last one returns). Settings alternate within each round, so drift of the
machine falls on both.

Prints per concurrency and setting: requests/s, p50 and p99 latency (ms), the mean batch the
server formed (its gatescope_batch_size histogram), and the ratio of throughputs.

Usage: /usr/bin/python3 benchmarks/bench_early_release.py [--model dgvit_fmnist]
       [--concurrency 1,2,4,8,32] [--rounds 2] [--server-cores 0] [--client-cores 1]
"""
import argparse
import pathlib
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_serving import run_perf, write_inputs  # noqa: E402
from server_harness import metric_value, start_server, stop_server  # noqa: E402


def mean_batch(server, model):
    count = metric_value(server, "gatescope_batch_size_count", model=model) or 0
    total = metric_value(server, "gatescope_batch_size_sum", model=model) or 0
    return total / count if count else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="dgvit_fmnist")
    ap.add_argument("--concurrency", default="1,2,4,8,32")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    ap.add_argument("--window-ms", type=int, default=1500)
    args = ap.parse_args()
    from gatescope.export.archive import read_metadata
    levels = [int(c) for c in args.concurrency.split(",")]

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_early_"))
    try:
        task = read_metadata(ROOT / "model_repository" / args.model / "1" / "model.pt")["task"]
        inputs = write_inputs(task, tmp / "inputs")
        repo = tmp / "repo"
        repo.mkdir()
        shutil.copytree(ROOT / "model_repository" / args.model, repo / args.model)
        rows = {(c, on): [] for c in levels for on in (True, False)}
        n = 0
        for _ in range(args.rounds):
            for c in levels:
                for on in (True, False):
                    n += 1
                    work = tmp / f"s{n}"
                    work.mkdir()
                    srv = start_server(work, repo, [f"--early_batch_release={str(on).lower()}",
                                                    "--torch_threads=1", "--instances=1"],
                                       wrap=["taskset", "-c", args.server_cores])
                    try:
                        r = run_perf(srv.address, args.model, args.client_cores, c, inputs,
                                     args.window_ms)
                        r["mean_batch"] = mean_batch(srv, args.model)
                    finally:
                        stop_server(srv)
                    rows[(c, on)].append(r)
                    print(f"concurrency {c}, early release {'on' if on else 'off'}: "
                          f"{r['throughput']:.1f} req/s, p50 {r['p50_us'] / 1000:.2f} ms, "
                          f"p99 {r['p99_us'] / 1000:.2f} ms, mean batch {r['mean_batch']:.1f}",
                          flush=True)

        print(f"\n{args.model}, shipped config.pbtxt; server on cores {args.server_cores}, "
              f"gatescope-perf on {args.client_cores}; mean of {args.rounds} round(s)\n")
        print("| concurrency | early release: req/s | p50 ms | p99 ms | mean batch | "
              "waiting the delay: req/s | p50 ms | p99 ms | mean batch | throughput on / off |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

        def mean(c, on, key):
            return sum(r[key] for r in rows[(c, on)]) / len(rows[(c, on)])

        for c in levels:
            cells = []
            for on in (True, False):
                cells += [f"{mean(c, on, 'throughput'):.1f}", f"{mean(c, on, 'p50_us') / 1000:.2f}",
                          f"{mean(c, on, 'p99_us') / 1000:.2f}", f"{mean(c, on, 'mean_batch'):.1f}"]
            ratio = mean(c, True, "throughput") / mean(c, False, "throughput")
            print(f"| {c} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
