#!/usr/bin/env python3
"""What the server costs per request, whatever the model: a Fashion-MNIST classifier whose
forward is almost free (one 784 x 10 matrix product) served like the shipped classifiers.

In one run, on the pinned cores of benchmarks/bench_serving.py (server on --server-cores,
gatescope-perf on --client-cores, 64 Fashion-MNIST test PNGs over gatescope.v1 Predict):
the stand-in's own forward in-process (scripts/gatescope_tune.py), then the server
unbatched (max_batch_size 1, concurrency 8) and with dynamic batching (max_batch_size 32,
--delay-us, concurrency 64). With a forward of a few microseconds, the served request rate
is the server's own ceiling: 1 / rate is what each request costs beyond the model (gRPC,
loopback TCP, PNG decoding, batching hand-offs, the response). From that cost c the
script prints the share of its in-process speed a model with forward f per request can
keep at most on the same core, f / (f + c), for a few f: the reach of the 85 % goals of
docs/performance.md on this machine.

Usage: /usr/bin/python3 benchmarks/bench_server_floor.py [--server-cores 0]
       [--forward-cpus LIST] [--client-cores 1] [--window-ms 1500] [--delay-us 200] [--server-flag=--FLAG=VALUE ...]
       [--transport tcp|unix] [--api gatescope|kserve|kserve-streaming|rest]
"""
import argparse
import pathlib
import shutil
import sys
import tempfile

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_serving import (APIS, TRANSPORTS, add_client_arguments,  # noqa: E402
                           check_client_arguments, in_process, row_note, serve_and_measure,
                           write_inputs)

NAME = "floor_fmnist"
# The shipped Fashion-MNIST classifiers' input (vit_fmnist's metadata), ten labels.
METADATA = {"name": NAME, "task": "image_classification", "arch": "linear",
            "input": {"shape": [1, 28, 28], "color": "gray", "scale": 1 / 255,
                      "mean": [0.286], "std": [0.353]},
            "labels": [f"class {i}" for i in range(10)], "outputs": ["logits"],
            "max_batch_size": 32}


class Linear(torch.nn.Module):
    """logits = x W: about 8,000 multiply-adds per image."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(784, 10) / 28)

    def forward(self, x):
        return {"logits": x.flatten(1) @ self.weight}


def write_repository(repo):
    from gatescope.export.archive import save_model
    torch.manual_seed(0)
    save_model(torch.jit.script(Linear()), repo, NAME, "1", METADATA,
               {"what": "a stand-in for the request path's cost, never trained"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--forward-cpus", default="",
                    help="the servers' --forward_cpus (within --server-cores); the stand-in's "
                         "in-process forward is then measured there")
    ap.add_argument("--client-cores", default="1")
    ap.add_argument("--window-ms", type=int, default=1500)
    ap.add_argument("--delay-us", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=0.5, help="in-process seconds per batch")
    ap.add_argument("--server-flag", action="append", default=[],
                    help="extra gatescope-server flag for both servers (repeatable), e.g. "
                         "--server-flag=--request_threads_batch_scheduling=false")
    add_client_arguments(ap)
    args = ap.parse_args()
    check_client_arguments(ap, args)
    args.threads = 1
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gatescope_floor_"))
    try:
        repo = tmp / "repo"
        write_repository(repo)
        measured = in_process(NAME, args.forward_cpus or args.server_cores, 1, args.seconds,
                              repository=repo)
        inputs = write_inputs("image_classification", tmp / "inputs")
        unbatched = serve_and_measure(repo, NAME, ["--max_batch_size=1", *args.server_flag], args, (1, 8),
                                      inputs, tmp / "unbatched")
        dynamic = serve_and_measure(
            repo, NAME, ["--max_batch_size=32", f"--max_queue_delay_us={args.delay_us}",
                         *args.server_flag],
            args, (1, 64), inputs, tmp / "dynamic")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    placed = (f" (forward passes on cores {args.forward_cpus}, --forward_cpus)"
              if args.forward_cpus else "")
    print(f"Server on cores {args.server_cores}{placed}, gatescope-perf on cores "
          f"{args.client_cores}, 1 Torch thread, {APIS[args.api]} of 64 Fashion-MNIST PNGs "
          f"over {TRANSPORTS[args.transport]}")
    print("\nIn-process forward of the stand-in: " + ", ".join(
        f"b{s['batch']} {1e6 / s['images_per_s']:.1f} us/image"
        for s in measured["measurements"]))
    print("\n| server | concurrency | req/s | us per request | p50 ms | p99 ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, rows in (("unbatched", unbatched), ("dynamic 32", dynamic)):
        for c, r in rows.items():
            print(f"| {name} | {c} | {r['throughput']:.1f}{row_note(r)} | "
                  f"{1e6 / r['throughput']:.0f} | "
                  f"{r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.2f} |")
    forward = {s["batch"]: 1e6 / s["images_per_s"] for s in measured["measurements"]}
    cost = {"unbatched": 1e6 / unbatched[8]["throughput"] - forward[1],
            "dynamic": 1e6 / dynamic[64]["throughput"] - min(forward.values())}
    print(f"\nServer cost per request beyond the forward: unbatched {cost['unbatched']:.0f} us, "
          f"dynamic {cost['dynamic']:.0f} us")
    print("\nMost a model can keep of its in-process speed, f / (f + cost), by its forward f "
          "per request (unbatched: per image at batch 1; dynamic: per image at its best batch):")
    print("\n| f | unbatched | dynamic |\n| --- | --- | --- |")
    for f in (100, 250, 500, 1000, 2000, 5000):
        print(f"| {f / 1000:g} ms | {100 * f / (f + cost['unbatched']):.0f} % | "
              f"{100 * f / (f + cost['dynamic']):.0f} % |")


if __name__ == "__main__":
    main()
