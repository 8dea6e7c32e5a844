#!/usr/bin/env python3
"""What the server adds to each shipped model: in-process forward vs served, side by side.

For every shipped model (or --models), in one run and on the same pinned cores:

1. the model's own forward in-process (scripts/gatescope_tune.py --json: TorchScript, random
   inputs of the declared shape, the server's jemalloc configuration, --threads Torch threads,
   pinned to --server-cores): per-image throughput and forward latency at each batch size up
   to the model's max_batch_size (1, 2, 4, ... 64 for the classifiers);
2. gatescope-server pinned to --server-cores (taskset), with batching off (max_batch_size 1,
   a copy of the model without its config.pbtxt) and then with dynamic batching as shipped
   (the model's config.pbtxt when it has one, else its own max_batch_size and
   --delay-us), each driven by gatescope-perf pinned to --client-cores at concurrency 1 and
   at saturation (unbatched: 8; dynamic: twice the batch size, at most 128), sending encoded
   PNGs a client would send: Fashion-MNIST test images (classifiers), held-out Colin27 slices
   (segmenters, 217 x 181, resized by the server to 224 x 192) or generated 128 x 128 scenes
   (detectors); text models get 64 held-out texts of their corpus that all have the same
   number of pieces, N (the length bucket, 16, 32, ..., of the held-out median, at most
   max_tokens; at max_tokens, texts at least that long, which the server truncates to it),
   so the server's calls have the shape the in-process forward is timed at (N pieces).

Prints per model the in-process table, the four served rows, and the ratios the performance
goals are stated in (docs/performance.md): unbatched at saturation / in-process batch 1,
dynamic at saturation / in-process best (up to the served max_batch_size, and of any batch
size), and p99 at concurrency 1 / (in-process batch-1 p50
+ the batching delay). With one core for the server and one for the load generator the
ratios are about the server's own work, not about cores left idle.

With --rounds N (default 1) each model is measured N times in turn, in-process then served,
and the summary gives each ratio's median over the rounds with its range: on a shared VM a
single run's ratio moves by several points between runs, and rounds measured side by side
show how far.

With --forward-cpus the server runs on --server-cores with --forward_cpus (its forward passes
on those CPUs, every other thread on the rest of --server-cores), and the in-process forward
is measured on the forward CPUs: e.g. --server-cores 0,1 --forward-cpus 0 --client-cores 1
gives the forwards core 0 of their own, gRPC core 1 shared with the load generator.

Usage: /usr/bin/python3 benchmarks/bench_serving.py [--models dgvit_fmnist,...]
       [--server-cores 0] [--forward-cpus ""] [--client-cores 1] [--threads 1]
       [--seconds 1.0] [--window-ms 1500] [--delay-us 1000] [--transport tcp|unix]
       [--api gatescope|kserve|kserve-streaming|rest] [--rounds 1]
"""
import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code, not installed
sys.path.insert(0, str(ROOT / "scripts"))  # gatescope_tune: its parser of config.pbtxt


def shipped_models():
    return sorted(d.name for d in (ROOT / "model_repository").iterdir()
                  if (d / "1" / "model.pt").exists())


def in_process(model, cores, threads, seconds, text_tokens=0, repository=None):
    """The tuner's in-process measurement of `model` (one JSON object) of `repository` (the
    shipped one by default), pinned to `cores`; text models at `text_tokens` pieces per
    text."""
    cmd = ["taskset", "-c", cores, "/usr/bin/python3", str(ROOT / "scripts" / "gatescope_tune.py"),
           "--models", model, "--cores", cores, "--torch-threads", str(threads),
           "--seconds", str(seconds), "--p99-ms", "1000000", "--json"]
    if text_tokens:
        cmd += ["--text-tokens", str(text_tokens)]
    if repository:
        cmd += ["--repository", str(repository)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


TEXTS = 64


def text_inputs(model, out_dir):
    """(paths, N): TEXTS held-out texts of the model's corpus (the one whose classes are its
    labels) that the model's tokenizer cuts into N pieces each (see the module docstring)."""
    from gatescope.data import text_corpora
    from gatescope.export.archive import read_metadata
    from gatescope.text_tokenizer import Tokenizer
    path = ROOT / "model_repository" / model / "1" / "model.pt"
    meta = read_metadata(path)
    corpus = text_corpora.with_labels(meta["labels"])
    tokenizer = Tokenizer.from_archive(path, meta)
    texts = corpus.test_texts
    counts = [len(tokenizer.encode(t)) for t in texts]
    most = meta["text"]["max_tokens"]
    median = sorted(counts)[len(counts) // 2]
    n = 16
    while n < median and n < most:
        n *= 2
    n = min(n, most)
    chosen = [t for t, c in zip(texts, counts) if c == n or (n == most and c >= most)][:TEXTS]
    if len(chosen) < TEXTS:
        raise RuntimeError(f"{model}: only {len(chosen)} held-out texts of {n} pieces")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, text in enumerate(chosen):
        paths.append(out_dir / f"{i:02d}.txt")
        paths[-1].write_text(text, encoding="utf-8")
    return [str(p) for p in paths], n


def write_inputs(task, out_dir):
    """Encoded PNGs for a model of `task`; returns their paths."""
    from gatescope.data.png import encode_gray_png
    out_dir.mkdir(parents=True, exist_ok=True)
    if task == "image_classification":
        from gatescope.data.fashion_mnist import write_pngs
        return [str(p) for p, _ in write_pngs(out_dir, start=9000, count=64)]
    if task == "image_segmentation":
        from gatescope.data import colin27
        images = colin27.load_slices()["test"]["images"][:16]
    else:
        from gatescope.data import detection_scenes as ds
        images = [s[0] for s in ds.make_scenes("heldout", 16, seed=1234, size_range=(128, 128))]
    paths = []
    for i, image in enumerate(images):
        path = out_dir / f"{i:02d}.png"
        path.write_bytes(encode_gray_png(image))
        paths.append(str(path))
    return paths


def model_inputs(model, out_dir):
    """(input paths, pieces per text or 0) a client sends shipped `model`: write_inputs for
    its task, or for a text model text_inputs (and a line saying how long the texts are)."""
    from gatescope.export.archive import read_metadata
    task = read_metadata(ROOT / "model_repository" / model / "1" / "model.pt")["task"]
    if task != "text_classification":
        return write_inputs(task, out_dir), 0
    inputs, tokens = text_inputs(model, out_dir)
    print(f"\n{model}: {len(inputs)} held-out texts of {tokens} pieces each")
    return inputs, tokens


def served_batching(model_dir, model_max, delay_us):
    """(max_batch_size, delay us, where from) the dynamic server will use for the model."""
    config = model_dir / "config.pbtxt"
    if not config.exists():
        return model_max, delay_us, "server flags"
    from gatescope_tune import serving_config_class
    with tempfile.TemporaryDirectory() as tmp:
        from google.protobuf import text_format
        parsed = text_format.Parse(config.read_text(), serving_config_class(pathlib.Path(tmp))())
    batch = parsed.max_batch_size or model_max
    return batch, parsed.dynamic_batching.max_queue_delay_microseconds, "config.pbtxt"


TRANSPORTS = {"tcp": "loopback TCP", "unix": "a Unix domain socket (--grpc_unix_socket)"}


APIS = {"gatescope": "gatescope.v1 Predict", "kserve": "KServe ModelInfer",
        "kserve-streaming": "KServe ModelStreamInfer (one stream per client thread)",
        "rest": "KServe REST infer with binary tensors (one kept-alive HTTP connection per "
                "client thread)"}


def add_client_arguments(ap):
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="tcp",
                    help="how gatescope-perf reaches the server: its loopback TCP port, or a "
                         "Unix domain socket (--grpc_unix_socket) as a client on the same "
                         "machine may")
    ap.add_argument("--api", choices=list(APIS), default="gatescope",
                    help="what gatescope-perf calls: " + "; ".join(
                        f"{k}: {v}" for k, v in APIS.items()))


def check_client_arguments(ap, args):
    """Refuses (ap.error) client arguments that do not go together, before anything runs."""
    if args.api == "rest" and args.transport == "unix":
        ap.error("--api rest goes over the REST port: --transport tcp only")


def api_flags(api):
    """gatescope-perf's flags for an --api choice."""
    return {"gatescope": ["--api", "gatescope"], "kserve": ["--api", "kserve"],
            "kserve-streaming": ["--api", "kserve", "--streaming"], "rest": ["--api", "rest"]}[api]


def run_perf(address, model, cores, concurrency, inputs, window_ms, api="gatescope",
             warmup_ms=1000, max_windows=6, stability=None, batch_size=1):
    """gatescope-perf's result row (a dict) at `concurrency`, pinned to `cores`: after
    `warmup_ms`, windows of `window_ms` until three agree within `stability` (its default
    when None) or `max_windows` have run; `batch_size` inputs per request (KServe APIs)."""
    cmd = ["taskset", "-c", cores, str(BUILD / "client" / "gatescope-perf"), "--server",
           address, "--model", model, *api_flags(api), "--concurrency", str(concurrency),
           *(["--batch-size", str(batch_size)] if batch_size > 1 else []),
           "--warmup-ms", str(warmup_ms), "--window-ms", str(window_ms),
           "--max-windows", str(max_windows),
           *(["--stability", str(stability)] if stability is not None else []), *inputs]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if not rows:
        raise RuntimeError(f"gatescope-perf failed: {out.stderr}")
    return rows[-1]


def start_pinned_server(repo, flags, args, work):
    """(the running server, the address gatescope-perf calls for --api/--transport): the
    server on `repo` with `flags`, pinned to --server-cores (its forwards on --forward-cpus
    when given), one instance, --threads Torch threads; `work` is created for its files."""
    from server_harness import start_server
    work.mkdir()
    placement = [f"--forward_cpus={args.forward_cpus}"] if args.forward_cpus else []
    socket = work / "grpc.sock"
    transport = [f"--grpc_unix_socket={socket}"] if args.transport == "unix" else []
    server = start_server(work, repo, extra=[*flags, *placement, *transport,
                                            f"--torch_threads={args.threads}", "--instances=1"],
                          wrap=["taskset", "-c", args.server_cores])
    address = f"unix:{socket}" if args.transport == "unix" else server.address
    if args.api == "rest":
        address = f"127.0.0.1:{server.http_port}"
    return server, address


def serve_and_measure(repo, model, flags, args, levels, inputs, work):
    from server_harness import stop_server
    server, address = start_pinned_server(repo, flags, args, work)
    try:
        return {c: run_perf(address, model, args.client_cores, c, inputs, args.window_ms,
                            args.api)
                for c in levels}
    finally:
        stop_server(server)


def row_note(r):
    """What a gatescope-perf result's row must say besides its numbers: not stable, errors."""
    errors = sum(r["errors"].values())
    note = "" if r["stable"] else " (not stable)"
    return note + (f" ({errors} errors)" if errors else "")


def report(model, measured, unbatched, dynamic, batching, heading=""):
    summaries = measured["measurements"]
    b1 = summaries[0]
    batch, delay_us, source = batching
    best = max(summaries, key=lambda s: s["images_per_s"])
    # The best batch the dynamic server can form (its max_batch_size), and the best of all.
    best_served = max((s for s in summaries if s["batch"] <= batch),
                      key=lambda s: s["images_per_s"])
    print(f"\n### {model}{heading}\n")
    print("In-process forward, per batch size: " + ", ".join(
        f"b{s['batch']} {s['images_per_s']:.1f}/s (p50 {s['p50_ms']:.2f} ms)" for s in summaries))
    print(f"\ndynamic = max_batch_size {batch}, max_queue_delay {delay_us} us ({source})\n")
    print("| server | concurrency | req/s | p50 ms | p99 ms | queue ms | infer ms (per request) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, rows in (("unbatched", unbatched), ("dynamic", dynamic)):
        for c, r in rows.items():
            print(f"| {name} | {c} | {r['throughput']:.1f}{row_note(r)} | "
                  f"{r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.2f} | "
                  f"{r['server_queue_us'] / 1000:.2f} | "
                  f"{r['server_compute_infer_us'] / 1000:.2f} |")
    u_sat, d_sat = list(unbatched.values())[-1], list(dynamic.values())[-1]
    d1 = dynamic[min(dynamic)]
    bound = b1["p50_ms"] + delay_us / 1000
    ratios = {
        "unbatched": u_sat["throughput"] / b1["images_per_s"],
        "dynamic": d_sat["throughput"] / best_served["images_per_s"],
        "dynamic_any": d_sat["throughput"] / best["images_per_s"],
        "p99_c1": d1["p99_us"] / 1000 / bound,
    }
    print(f"\nunbatched / in-process b1: {100 * ratios['unbatched']:.0f} % "
          f"({u_sat['throughput']:.1f} vs {b1['images_per_s']:.1f}); dynamic / in-process best "
          f"up to b{batch} (b{best_served['batch']}): {100 * ratios['dynamic']:.0f} % "
          f"({d_sat['throughput']:.1f} vs {best_served['images_per_s']:.1f}), of any batch "
          f"(b{best['batch']}): {100 * ratios['dynamic_any']:.0f} %; dynamic p99 at "
          f"concurrency 1 / (b1 p50 + delay): {ratios['p99_c1']:.2f}x "
          f"({d1['p99_us'] / 1000:.2f} vs {bound:.2f} ms)")
    return ratios


def add_placement_arguments(ap):
    """--models, and where the server, its forwards (in-process too) and gatescope-perf run."""
    ap.add_argument("--models", default="", help="comma-separated; default: every shipped model")
    ap.add_argument("--server-cores", default="0", help="taskset CPU list of the server")
    ap.add_argument("--forward-cpus", default="",
                    help="the server's --forward_cpus (within --server-cores); the in-process "
                         "forward then runs there")
    ap.add_argument("--client-cores", default="1", help="taskset CPU list of gatescope-perf")
    ap.add_argument("--threads", type=int, default=1, help="Torch threads, in-process and served")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_placement_arguments(ap)
    ap.add_argument("--seconds", type=float, default=1.0, help="in-process seconds per batch")
    ap.add_argument("--window-ms", type=int, default=1500)
    ap.add_argument("--delay-us", type=int, default=1000,
                    help="batching delay of a model without config.pbtxt")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each model this many times in turn (in-process, then "
                         "served); the summary gives each ratio's median and range")
    add_client_arguments(ap)
    args = ap.parse_args()
    check_client_arguments(ap, args)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    models = args.models.split(",") if args.models else shipped_models()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gatescope_bench_"))
    forward_cores = args.forward_cpus or args.server_cores
    placed = (f" (forward passes on cores {args.forward_cpus}, --forward_cpus)"
              if args.forward_cpus else "")
    print(f"Server on cores {args.server_cores}{placed}, gatescope-perf on cores "
          f"{args.client_cores}, {args.threads} Torch thread(s), 1 instance; in-process forward "
          f"on cores {forward_cores}; {APIS[args.api]} over {TRANSPORTS[args.transport]}, "
          "encoded PNG inputs (text models: UTF-8 texts)")
    summary = []
    try:
        for model in models:
            inputs, tokens = model_inputs(model, tmp / model / "inputs")
            # Unbatched: a copy of the model without its config.pbtxt, so nothing batches.
            bare = tmp / model / "bare"
            shutil.copytree(ROOT / "model_repository" / model, bare / model,
                            ignore=shutil.ignore_patterns("config.pbtxt"))
            rounds = []
            for r in range(args.rounds):
                work = tmp / model / f"round{r + 1}"
                work.mkdir()
                measured = in_process(model, forward_cores, args.threads, args.seconds, tokens)
                model_max = max(s["batch"] for s in measured["measurements"])
                unbatched = serve_and_measure(bare, model, ["--max_batch_size=1"], args, (1, 8),
                                              inputs, work / "unbatched")
                batching = served_batching(ROOT / "model_repository" / model, model_max,
                                           args.delay_us)
                dynamic = serve_and_measure(
                    ROOT / "model_repository", model,
                    [f"--max_batch_size={model_max}", f"--max_queue_delay_us={args.delay_us}"],
                    args, (1, min(128, 2 * batching[0])), inputs, work / "dynamic")
                heading = f", round {r + 1} of {args.rounds}" if args.rounds > 1 else ""
                rounds.append(report(model, measured, unbatched, dynamic, batching, heading))
            summary.append((model, rounds))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_summary(summary, args.rounds)


def summary_cell(values, percent):
    """One ratio over the rounds: the value, or the median with the range."""
    show = (lambda v: f"{100 * v:.0f} %") if percent else (lambda v: f"{v:.2f}x")
    if len(values) == 1:
        return show(values[0])
    return (f"{show(statistics.median(values))} "
            f"({show(min(values))} - {show(max(values))})")


def print_summary(summary, rounds):
    """The ratios of every model: per model a row, each cell the median over `rounds` with
    its range when there are several."""
    over = f", median (range) of {rounds} rounds" if rounds > 1 else ""
    print(f"\n| model{over} | unbatched / in-process b1 | dynamic / in-process best up to "
          "its max_batch_size | dynamic / in-process best of any batch | "
          "p99 c1 / (b1 + delay) |")
    print("| --- | --- | --- | --- | --- |")
    for model, per_round in summary:
        cells = [summary_cell([r[key] for r in per_round], key != "p99_c1")
                 for key in ("unbatched", "dynamic", "dynamic_any", "p99_c1")]
        print(f"| {model} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
