#!/usr/bin/env python3
"""Text serving speed, side by side in one run, on held-out texts of mixed lengths:
1. the padding policy, in process: the shipped model's forward over the same arrival-order
   groups of --batch texts, padded to each group's longest vs per length bucket (16, 32,
   64, ... pieces; what the server does), texts/s;
2. the server against the model itself: gatescope.v1 Predict calls from --clients
   concurrent client threads (server pinned to --server-cores, this process to
   --client-cores) vs the in-process bucketed forward of the same texts, texts/s and the
   ratio. The in-process side is the model alone, on texts tokenized beforehand: the
   server tokenizes a long text only as far as the model reads it, which a whole-text
   Python encode in the timed loop would overcharge (until 2026-11-27 it was included).

Usage: /usr/bin/python3 benchmarks/bench_text_serving.py [--model dgt_spam] [--texts 512]
"""
import argparse
import concurrent.futures
import os
import pathlib
import sys
import tempfile
import time

import grpc
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code
from server_harness import import_api_modules, start_server, stop_server  # noqa: E402

from gatescope import ops  # noqa: E402
from gatescope.data import text_corpora  # noqa: E402
from gatescope.export.archive import read_metadata  # noqa: E402
from gatescope.text_batching import pad_batch  # noqa: E402
from gatescope.text_tokenizer import Tokenizer  # noqa: E402


def as_the_server_runs():
    """Re-executes this script under the server's allocator (jemalloc configured as
    server/allocator.cc does: bench_allocators' `jemalloc-server`) with OpenBLAS on one
    thread and its kernels as the server chooses them (gatescope.blas_core): glibc's malloc
    unmaps large blocks on every free, which alone makes the in-process forward several
    times slower than the server's."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_allocators import ALLOCATORS
    from gatescope import blas_core
    env = dict(ALLOCATORS["jemalloc-server"], OPENBLAS_NUM_THREADS="1",
               **blas_core.server_environment())
    if all(os.environ.get(k) == v for k, v in env.items()):
        return
    os.execve(sys.executable, [sys.executable, str(pathlib.Path(__file__).resolve()),
                               *sys.argv[1:]], dict(os.environ, **env))


def bucket(n):
    b = 16
    while b < n:
        b *= 2
    return b


def forward_groups(module, seqs, batch, bucketed):
    with torch.no_grad():
        for at in range(0, len(seqs), batch):
            group = seqs[at:at + batch]
            parts = {}
            for s in group:
                parts.setdefault(bucket(len(s)) if bucketed else 0, []).append(s)
            for members in parts.values():
                module(*pad_batch(members, 0))


def timed(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="dgt_spam")
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--offset", type=int, default=0, help="first held-out text used")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    args = ap.parse_args()
    as_the_server_runs()
    os.sched_setaffinity(0, {int(c) for c in args.client_cores.split(",")})
    torch.set_num_threads(1)
    ops.load()
    path = ROOT / "model_repository" / args.model / "1" / "model.pt"
    meta = read_metadata(path)
    tok = Tokenizer.from_archive(path, meta)
    corpus = args.model.split("_", 1)[1]
    fits = [t for t in text_corpora.load(corpus).test_texts
            if len(t.encode()) <= meta["text"]["max_text_bytes"]]  # what the server takes
    texts = fits[args.offset:args.offset + args.texts]
    limit = meta["text"]["max_tokens"]
    seqs = [tok.encode(t)[:limit] for t in texts]
    module = torch.jit.load(str(path))
    lengths = sorted(len(s) for s in seqs)
    print(f"{args.model}: {len(texts)} held-out texts, pieces p50 {lengths[len(lengths) // 2]}, "
          f"max {lengths[-1]} (max_tokens {limit}); groups of {args.batch} in arrival order")
    longest = timed(lambda: forward_groups(module, seqs, args.batch, False))
    buckets = timed(lambda: forward_groups(module, seqs, args.batch, True))
    print("| padding | texts/s | ratio to longest |\n| --- | --- | --- |")
    print(f"| to each group's longest | {len(texts) / longest:.0f} | 1.00 |")
    print(f"| per length bucket | {len(texts) / buckets:.0f} | {longest / buckets:.2f} |")

    in_process = buckets  # the same forward over the texts tokenized beforehand
    tmp = pathlib.Path(tempfile.mkdtemp())
    for sub in ("stubs", "server"):
        (tmp / sub).mkdir()
    _, _, v1, v1_grpc = import_api_modules(tmp / "stubs")
    server = start_server(tmp / "server", ROOT / "model_repository",
                          extra=["--torch_threads=1"],
                          wrap=["taskset", "-c", args.server_cores])
    try:
        channel = grpc.insecure_channel(server.address)
        stub = v1_grpc.InferenceStub(channel)
        requests = [v1.PredictRequest(model_name=args.model, text=t.encode(), top_k=1)
                    for t in texts]
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda r: stub.Predict(r, timeout=120), requests[:64]))  # warm-up
            served = timed(lambda: list(pool.map(lambda r: stub.Predict(r, timeout=120),
                                                 requests)))
        channel.close()
    finally:
        stop_server(server)
    print("\n| path | texts/s | ratio to in-process |\n| --- | --- | --- |")
    print(f"| in process: bucketed forward (texts tokenized beforehand), "
          f"batches of {args.batch} | {len(texts) / in_process:.0f} | 1.00 |")
    print(f"| server: gatescope.v1 Predict, {args.clients} concurrent clients | "
          f"{len(texts) / served:.0f} | {in_process / served:.2f} |")


if __name__ == "__main__":
    main()
