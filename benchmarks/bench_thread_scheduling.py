#!/usr/bin/env python3
"""What --request_threads_batch_scheduling buys and costs, both settings side by side in one
run (rounds interleaved: on, off, on, off, ...), server pinned to --server-cores with one
Torch thread, load generator and probes pinned to --client-cores.

Gain: `--model` (default dgvit_fmnist, forward ~0.5 ms) served unbatched (a copy without its
config.pbtxt, --max_batch_size=1) at concurrency 8, and with its shipped dynamic batching at
concurrency 32: requests/s and the server's forward time per request.

Cost: the latency of a control call (KServe ServerReady, what a readiness probe sends) made
every 20 ms while `--long-model` (default pvt_gdla_colin27, forward ~50-80 ms) serves
gatescope-perf at concurrency 2 on the same server core. Under SCHED_BATCH a waking gRPC
thread does not preempt the forward, so such calls wait for the scheduler's time slice
instead: this is the price in milliseconds.

Usage: /usr/bin/python3 benchmarks/bench_thread_scheduling.py [--rounds 2]
       [--server-cores 0] [--client-cores 1] [--probes 150]
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_serving import run_perf, write_inputs  # noqa: E402  (also puts scripts/ on the path)
from gatescope_tune import parse_cpu_list, percentile  # noqa: E402
from server_harness import import_api_modules, start_server, stop_server  # noqa: E402


def serve(work, repo, flag, extra, cores):
    work.mkdir(parents=True)
    return start_server(work, repo, [f"--request_threads_batch_scheduling={flag}",
                                     "--torch_threads=1", "--instances=1", *extra],
                        wrap=["taskset", "-c", cores])


def copy_model(name, dest, keep_config):
    shutil.copytree(ROOT / "model_repository" / name, dest / name)
    if not keep_config:
        (dest / name / "config.pbtxt").unlink(missing_ok=True)


def probe_latencies(server, apis, count, period_s):
    """Milliseconds of `count` ServerReady calls, one every `period_s`."""
    import grpc
    kv, kv_grpc = apis[0], apis[1]
    with grpc.insecure_channel(server.address) as channel:
        stub = kv_grpc.GRPCInferenceServiceStub(channel)
        stub.ServerReady(kv.ServerReadyRequest(), timeout=10)  # connect outside the timing
        out = []
        for _ in range(count):
            t0 = time.perf_counter()
            assert stub.ServerReady(kv.ServerReadyRequest(), timeout=10).ready
            out.append((time.perf_counter() - t0) * 1000)
            time.sleep(period_s)
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="dgvit_fmnist")
    ap.add_argument("--long-model", default="pvt_gdla_colin27")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    ap.add_argument("--probes", type=int, default=150)
    ap.add_argument("--window-ms", type=int, default=1500)
    args = ap.parse_args()
    from gatescope.export.archive import read_metadata
    os.sched_setaffinity(0, parse_cpu_list(args.client_cores))  # the probes run in this process

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_sched_"))
    try:
        (tmp / "stubs").mkdir()
        apis = import_api_modules(tmp / "stubs")
        task = read_metadata(ROOT / "model_repository" / args.model / "1" / "model.pt")["task"]
        inputs = write_inputs(task, tmp / "inputs")
        long_inputs = write_inputs("image_segmentation", tmp / "long_inputs")
        unbatched, dynamic, ctl = tmp / "unbatched", tmp / "dynamic", tmp / "long"
        for d in (unbatched, dynamic, ctl):
            d.mkdir()
        copy_model(args.model, unbatched, keep_config=False)
        copy_model(args.model, dynamic, keep_config=True)
        copy_model(args.long_model, ctl, keep_config=False)

        results = {True: [], False: []}
        n = 0
        for r in range(args.rounds):
            for flag in (True, False):
                row = {}
                for name, repo, extra, conc in (("unbatched", unbatched, ["--max_batch_size=1"], 8),
                                                ("dynamic", dynamic, [], 32)):
                    n += 1
                    srv = serve(tmp / f"s{n}", repo, str(flag).lower(), extra, args.server_cores)
                    try:
                        row[name] = run_perf(srv.address, args.model, args.client_cores, conc,
                                             inputs, args.window_ms)
                    finally:
                        stop_server(srv)
                n += 1
                srv = serve(tmp / f"s{n}", ctl, str(flag).lower(), ["--max_batch_size=1"],
                            args.server_cores)
                try:
                    load = subprocess.Popen(
                        ["taskset", "-c", args.client_cores, str(BUILD / "client" / "gatescope-perf"),
                         "--server", srv.address, "--model", args.long_model, "--concurrency", "2",
                         "--warmup-ms", "0", "--window-ms", "60000", "--max-windows", "3",
                         *long_inputs], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(2.0)  # the load is running
                    with_load = probe_latencies(srv, apis, args.probes, 0.02)
                    load.kill()
                    load.wait()
                    time.sleep(0.5)
                    idle = probe_latencies(srv, apis, args.probes // 3, 0.02)
                finally:
                    stop_server(srv)
                row["probe"] = with_load
                row["probe_idle"] = idle
                results[flag].append(row)
                print(f"round {r + 1}, SCHED_BATCH {'on' if flag else 'off'}: unbatched "
                      f"{row['unbatched']['throughput']:.1f} req/s, dynamic "
                      f"{row['dynamic']['throughput']:.1f} req/s, ServerReady under "
                      f"{args.long_model} load p50 {percentile(with_load, 0.5):.2f} / p99 "
                      f"{percentile(with_load, 0.99):.2f} / max {with_load[-1]:.2f} ms "
                      f"(idle p50 {percentile(idle, 0.5):.2f})", flush=True)

        print(f"\nServer on cores {args.server_cores}, load and probes on {args.client_cores}; "
              f"{args.rounds} interleaved round(s) per setting\n")
        print(f"| request threads | {args.model} unbatched c8 req/s (forward ms) | dynamic c32 "
              f"req/s (forward ms per request) | ServerReady during {args.long_model} load: "
              "p50 / p99 / max ms |")
        print("| --- | --- | --- | --- |")
        for flag in (True, False):
            for row in results[flag]:
                u, d, p = row["unbatched"], row["dynamic"], row["probe"]
                print(f"| {'SCHED_BATCH' if flag else 'SCHED_OTHER'} | {u['throughput']:.1f} "
                      f"({u['server_compute_infer_us'] / 1000:.3f}) | {d['throughput']:.1f} "
                      f"({d['server_compute_infer_us'] / 1000:.3f}) | {percentile(p, 0.5):.2f} / "
                      f"{percentile(p, 0.99):.2f} / {p[-1]:.2f} |")
        mean = {f: {k: sum(r[k]["throughput"] for r in results[f]) / len(results[f])
                    for k in ("unbatched", "dynamic")} for f in (True, False)}
        print(f"\nSCHED_BATCH / SCHED_OTHER (mean of rounds): unbatched "
              f"{mean[True]['unbatched'] / mean[False]['unbatched']:.2f}x, dynamic "
              f"{mean[True]['dynamic'] / mean[False]['dynamic']:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
