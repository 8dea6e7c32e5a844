#!/usr/bin/env python3
"""The same inference over each protocol, side by side in one run against one server:
KServe gRPC (raw FP32 contents), KServe REST with Triton's binary tensor extension, and
KServe REST with JSON tensors, for batches of 1 and 16 Fashion-MNIST images to
dgvit_fmnist. The server is pinned to --server-cores, the client (this process, one
persistent connection per protocol, sequential calls) to --client-cores. Prints per
protocol and batch the median and p99 latency and the ratio to gRPC, and checks that every
protocol returned the same logits.

Usage: /usr/bin/python3 benchmarks/bench_protocols.py [--calls 300] [--server-cores 0]
       [--client-cores 1]
"""
import argparse
import http.client
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

import grpc
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code, not installed
from server_harness import import_api_modules, start_server, stop_server  # noqa: E402

from gatescope.data import fashion_mnist  # noqa: E402

MODEL = "dgvit_fmnist"


def rest_call(conn, body, headers):
    conn.request("POST", f"/v2/models/{MODEL}/infer", body=body, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    assert r.status == 200, raw[:200]
    return r.getheader("Inference-Header-Content-Length"), raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    args = ap.parse_args()
    os.sched_setaffinity(0, {int(c) for c in args.client_cores.split(",")})
    images, _ = fashion_mnist.load_split("t10k")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_protocols."))
    repo = work / "repo"
    repo.mkdir()
    shutil.copytree(ROOT / "model_repository" / MODEL, repo / MODEL)
    (work / "stubs").mkdir()
    kv, kv_grpc, _, _ = import_api_modules(work / "stubs")
    server = start_server(work, repo, ["--torch_threads=1"],
                          wrap=["taskset", "-c", args.server_cores])
    rows = []
    try:
        channel = grpc.insecure_channel(server.address)
        stub = kv_grpc.GRPCInferenceServiceStub(channel)
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
        for batch in (1, 16):
            x = ((images[:batch].astype(np.float32) / 255.0 - fashion_mnist.MEAN)
                 / fashion_mnist.STD)[:, None].astype("<f4")
            req = kv.ModelInferRequest(model_name=MODEL)
            req.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
            req.outputs.add(name="logits")
            req.raw_input_contents.append(x.tobytes())
            head = json.dumps({"inputs": [{"name": "input", "datatype": "FP32",
                                           "shape": list(x.shape),
                                           "parameters": {"binary_data_size": x.nbytes}}],
                               "outputs": [{"name": "logits",
                                            "parameters": {"binary_data": True}}]}).encode()
            binary_body = head + x.tobytes()
            binary_headers = {"Inference-Header-Content-Length": str(len(head)),
                              "Content-Type": "application/octet-stream"}
            json_body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32",
                                                "shape": list(x.shape), "data": x.ravel().tolist()}],
                                    "outputs": [{"name": "logits"}]}).encode()

            def grpc_logits():
                r = stub.ModelInfer(req, timeout=60)
                return np.frombuffer(r.raw_output_contents[0], "<f4").reshape(batch, 10)

            def binary_logits():
                n, raw = rest_call(conn, binary_body, binary_headers)
                return np.frombuffer(raw[int(n):], "<f4").reshape(batch, 10)

            def json_logits():
                _, raw = rest_call(conn, json_body, {"Content-Type": "application/json"})
                return np.array(json.loads(raw)["outputs"][0]["data"], np.float32).reshape(batch, 10)

            results = {}
            for name, call in (("gRPC raw", grpc_logits), ("REST binary", binary_logits),
                               ("REST JSON", json_logits)):
                results[name] = call()
                for _ in range(20):
                    call()  # warm-up
                took = []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    call()
                    took.append(time.perf_counter() - t0)
                took = np.array(took) * 1e3
                rows.append((batch, name, np.median(took), np.percentile(took, 99)))
            for name, logits in results.items():
                assert np.abs(logits - results["gRPC raw"]).max() < 1e-5, name
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    print(f"dgvit_fmnist, {args.calls} sequential calls per row, server on cores "
          f"{args.server_cores}, client on {args.client_cores}; same logits on every protocol")
    print(f"{'batch':>5} {'protocol':<12} {'p50 ms':>8} {'p99 ms':>8} {'p50 / gRPC':>11}")
    base = {b: p50 for b, name, p50, _ in rows if name == "gRPC raw"}
    for batch, name, p50, p99 in rows:
        print(f"{batch:>5} {name:<12} {p50:>8.3f} {p99:>8.3f} {p50 / base[batch]:>10.2f}x")


if __name__ == "__main__":
    main()
