"""What the Python client's kept-alive connections save per call: the gatescope_client
Client (one HTTP/1.1 connection per calling thread, kept between calls) against a new
connection per call (urllib.request.urlopen, how the client called before), side by side,
over HTTP and over HTTPS (a certificate made here by openssl).

The server serves dgvit_fmnist pinned to --server-cores; this process (one calling thread)
is pinned to --client-cores. Two calls: `live` (GET /v2/health/live: the transport and
nothing else) and `predict` (one 28x28 PNG, top-1: a small model's forward as well). The
ways of calling alternate over --rounds rounds of --calls calls each; the table gives the
median per-call time of each way and the ratio per call (per call / kept-alive).

Usage: PYTHONPATH=models:client/python /usr/bin/python3 benchmarks/bench_python_client.py
       [--rounds 3] [--calls 300] [--server-cores 0] [--client-cores 1]
"""
import argparse
import base64
import json
import os
import pathlib
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code
from server_harness import REPO, start_server, stop_server  # noqa: E402

from gatescope.data.png import encode_gray_png  # noqa: E402
from gatescope_client import Client  # noqa: E402

MODEL = "dgvit_fmnist"


def make_certificate(d):
    """A self-signed server certificate for 127.0.0.1: (certificate, key) paths."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key",
                    "-out", "server.crt", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   cwd=d, check=True, capture_output=True)
    return d / "server.crt", d / "server.key"


def per_call(base, context, path, body):
    """One call the way the client used to: a new connection (and TLS handshake) per call."""
    request = urllib.request.Request(base + path, data=body, method="POST" if body else "GET",
                                     headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(request, timeout=60, context=context) as r:
        return r.read()


def timed(call, n):
    """Seconds per call over n calls."""
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n


def measure(base, context, args, png):
    predict_path = f"/v2/models/{MODEL}/predict"
    predict_body = json.dumps({"image": base64.b64encode(png).decode(), "top_k": 1}).encode()
    times = {}
    with Client(base, ssl_context=context, timeout=60) as client:
        ways = {
            ("live", "kept-alive"): client.live,
            ("live", "per call"): lambda: per_call(base, context, "/v2/health/live", None),
            ("predict", "kept-alive"): lambda: client.predict(MODEL, png, top_k=1),
            ("predict", "per call"): lambda: per_call(base, context, predict_path, predict_body),
        }
        for call in ways.values():  # warm: the model's first forward, the connection
            call()
        for _ in range(args.rounds):
            for key, call in ways.items():
                times.setdefault(key, []).append(timed(call, args.calls))
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    args = ap.parse_args()
    os.sched_setaffinity(0, {int(c) for c in args.client_cores.split(",")})
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_python_client_"))
    png = encode_gray_png((np.arange(28 * 28) % 251).astype(np.uint8).reshape(28, 28))
    rows = []
    try:
        repo = tmp / "repo"
        shutil.copytree(REPO / "model_repository" / MODEL, repo / MODEL)
        cert, key = make_certificate(tmp)
        for scheme, extra in (("http", []),
                              ("https", [f"--tls_cert_file={cert}", f"--tls_key_file={key}"])):
            work = tmp / scheme
            work.mkdir()
            srv = start_server(work, repo, ["--torch_threads=1", *extra],
                               wrap=("taskset", "-c", args.server_cores))
            try:
                context = ssl.create_default_context(cafile=str(cert)) if extra else None
                times = measure(f"{scheme}://127.0.0.1:{srv.http_port}", context, args, png)
            finally:
                assert stop_server(srv) == 0, srv.log()
            for call in ("live", "predict"):
                kept = statistics.median(times[(call, "kept-alive")])
                fresh = statistics.median(times[(call, "per call")])
                rows.append((scheme, call, kept, fresh))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Server on cores {args.server_cores} (1 Torch thread), one calling thread on cores "
          f"{args.client_cores}; median of {args.rounds} rounds of {args.calls} calls, ways "
          "alternated")
    print("\n| scheme | call | kept-alive ms/call | new connection per call ms/call | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for scheme, call, kept, fresh in rows:
        print(f"| {scheme} | {call} | {1e3 * kept:.3f} | {1e3 * fresh:.3f} | "
              f"{fresh / kept:.2f}x |")


if __name__ == "__main__":
    main()
