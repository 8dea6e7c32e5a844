#!/usr/bin/env python3
"""The server on a GPU (scripts/gpu/gpu_check.sh's `serve` stage; docs/gpu.md).

1. Answers: the same model repository served twice, every model once with a KIND_CPU and
   once with a KIND_GPU instance (two server processes); the same KServe v2 requests (a batch
   of carried inputs in one call, then each alone, concurrently, so that GPU batches form)
   go to both, and every output is compared: integer and string outputs exactly, floating
   ones by max |gpu - cpu| / max(1, |cpu|).
2. Overhead: for the models named by --perf, the in-process GPU throughput of the archive
   (torch.jit on CUDA, inputs copied in from pinned CPU memory and outputs copied back, as
   the server does) by batch size, against the GPU server driven by gatescope-perf at
   concurrency 1 (unbatched: vs in-process batch 1) and at --concurrency (dynamic batching:
   vs the in-process batch of the server's max_batch_size; the best batch is reported too).
   Goal: >= 85 % for both.
Writes --json and a markdown table next to it (.md); exits 1 when an answer differs.
"""
import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
sys.path.insert(0, str(REPO / "models"))
sys.path.insert(0, str(REPO / "tests" / "integration"))  # server_harness: test code, not installed
import server_harness  # noqa: E402
from gatescope_client.client import Client  # noqa: E402

# Which carried inputs a model reads: by the name of its training data.
INPUT_DIRS = [("fmnist", "fmnist"), ("colin27", "colin27"), ("scenes", "scenes"),
              ("wordnet", "texts"), ("spam", "texts")]
FLOAT_TOLERANCE = 1e-3


def server_env():
    """The servers' environment on top of this one: the carried libraries, when given."""
    extra = os.environ.get("GATESCOPE_SERVER_LD_LIBRARY_PATH")
    return {"LD_LIBRARY_PATH": extra} if extra else None


def link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_repository(models, out, kind, max_batch):
    """A copy of `models` whose config.pbtxt gives every model one `kind` instance. Both
    copies batch alike (max_batch_size `max_batch`, a 500 us delay instead of the delays
    tuned for a CPU), so that the same calls are valid on both."""
    out.mkdir(parents=True)
    for model in sorted(p for p in models.iterdir() if p.is_dir()):
        dst = out / model.name
        dst.mkdir()
        for version in (p for p in model.iterdir() if p.is_dir()):
            # Hard links (the server refuses version directories that resolve elsewhere).
            shutil.copytree(version, dst / version.name, copy_function=link_or_copy)
        config = (model / "config.pbtxt").read_text() if (model / "config.pbtxt").exists() else ""
        config = re.sub(r"instance_group\s*\[[^\]]*\]", "", config)
        config = re.sub(r"max_batch_size:\s*\d+", f"max_batch_size: {max_batch}", config)
        config = re.sub(r"preferred_batch_size:\s*\d+", "", config)
        config = re.sub(r"max_queue_delay_microseconds:\s*\d+", "max_queue_delay_microseconds: 500",
                        config)
        config += f"\ninstance_group [ {{ kind: {kind} count: 1 }} ]\n"
        (dst / "config.pbtxt").write_text(config)


def input_files(model, inputs_dir):
    """(kind, the carried images or texts `model` reads)."""
    for key, sub in INPUT_DIRS:
        if key in model:
            return sub, sorted(f for f in (inputs_dir / sub).iterdir() if f.suffix in (".png", ".txt"))
    raise ValueError(f"no carried inputs for {model}")


def inputs_for(model, inputs_dir):
    kind, files = input_files(model, inputs_dir)
    return kind, [f.read_bytes() for f in files]


def compare(cpu, gpu):
    """{output: error}: a floating output's max |gpu - cpu| / max(1, |cpu|); for any other
    output (classes, counts, masks, strings) the fraction of unequal items, which must be 0."""
    errors = {}
    for name, a in cpu.items():
        b = gpu.get(name)
        if b is None or np.shape(a) != np.shape(b):
            errors[name] = float("inf")
        elif a.dtype.kind == "f":
            errors[name] = float(np.max(np.abs(b.astype(np.float64) - a) /
                                        np.maximum(1.0, np.abs(a)), initial=0.0))
        else:
            errors[name] = float(np.mean(np.asarray(a) != np.asarray(b))) if a.size else 0.0
    return errors


def check_answers(model, clients, inputs_dir, input_name):
    kind, items = inputs_for(model, inputs_dir)
    batch = np.array(items, dtype=object)
    results = {}
    notes = []
    for side, client in clients.items():
        try:
            together = client.infer(model, {input_name: batch})
        except Exception as e:  # e.g. outputs of native-size inputs that cannot stack
            together = None
            notes.append(f"{side} batch call: {type(e).__name__}: {str(e)[:160]}")
        with cf.ThreadPoolExecutor(len(items)) as pool:
            alone = list(pool.map(lambda x: client.infer(model, {input_name: np.array([x], dtype=object)}), items))
        results[side] = together, alone
    errs = {}
    if results["cpu"][0] is not None and results["gpu"][0] is not None:
        errs = compare(results["cpu"][0], results["gpu"][0])
    for c, g in zip(results["cpu"][1], results["gpu"][1]):
        for name, e in compare(c, g).items():
            errs[name] = max(errs.get(name, 0.0), e)
    # A batch on the GPU equals the same examples alone on the GPU.
    for i, g in enumerate(results["gpu"][1] if results["gpu"][0] is not None else []):
        row = {k: v[i:i + 1] for k, v in results["gpu"][0].items()}
        for name, e in compare(g, row).items():
            errs[f"{name} (gpu batch vs alone)"] = max(errs.get(f"{name} (gpu batch vs alone)", 0.0), e)
    floating = {name for name, a in results["cpu"][1][0].items() if a.dtype.kind == "f"}
    ok = all(e <= (FLOAT_TOLERANCE if name.split(" ")[0] in floating else 0.0)
             for name, e in errs.items())
    return {"model": model, "inputs": f"{len(items)} {kind}", "ok": ok and not notes,
            "errors": errs, "notes": notes}


def in_process(model_path, example, batches, device, seconds=1.0):
    """images/s of the archive on `device` by batch size, copies in and out included."""
    import torch
    torch.ops.load_library(os.environ["GATESCOPE_OPS_LIB"])
    module = torch.jit.load(str(model_path), map_location=device).eval()
    out = {}
    with torch.inference_mode():
        for b in batches:
            host = example.expand(b, *example.shape[1:]).contiguous()
            if device == "cuda":
                host = host.pin_memory()
            for _ in range(3):
                y = module(host.to(device, non_blocking=True))
                _ = {k: v.to("cpu") for k, v in y.items()}
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                y = module(host.to(device, non_blocking=True))
                _ = {k: v.to("cpu") for k, v in y.items()}  # waits for the device
                n += 1
            out[b] = n * b / (time.perf_counter() - t0)
    return out


def perf_server(build, address, model, files, concurrency):
    cmd = [str(build / "client" / "gatescope-perf"), "--server", address, "--model", model,
           f"--concurrency={concurrency}", "--warmup-ms=700", "--window-ms=1000",
           "--max-windows=4", "--format=json", *map(str, files)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(server_env() or {})})
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"gatescope-perf failed: {done.stderr[-800:]}")
    return json.loads(lines[-1])


def overhead(model, args, gpu_address):
    import torch
    from gatescope.data.png import decode_png
    _, files = input_files(model, args.inputs)
    pixels = decode_png(files[0].read_bytes()).astype(np.float32) / 255.0
    example = torch.from_numpy(pixels).view(1, 1, *pixels.shape)
    device = "cuda" if args.second_kind == "KIND_GPU" else "cpu"
    batches = sorted({1, 8, 32, args.max_batch, 2 * args.max_batch})
    own = in_process(args.models / model / "1" / "model.pt", example, batches, device)
    best_batch = max(own, key=own.get)
    row = {"model": model, "in_process": own}
    # Dynamic batching is held to the largest batch the server may form.
    for label, c, ref in (("unbatched", 1, own[1]), ("dynamic", args.concurrency, own[args.max_batch])):
        r = perf_server(args.build, gpu_address, model, files, c)
        row[label] = {"concurrency": c, "throughput": r["throughput"], "p50_us": r["p50_us"],
                      "p99_us": r["p99_us"], "reference": ref, "ratio": r["throughput"] / ref}
    row["best_batch"] = best_batch
    return row


def markdown(report):
    lines = ["| model | inputs | GPU vs CPU: worst output | GPU batch vs alone | ok |",
             "|---|---|---|---|---|"]
    for r in report["answers"]:
        errs = r.get("errors", {})
        vs_cpu = {k: v for k, v in errs.items() if "(gpu batch" not in k}
        vs_alone = {k: v for k, v in errs.items() if "(gpu batch" in k}
        worst = (lambda d: f"{max(d, key=d.get).split(' ')[0]} {max(d.values()):.1e}" if d else "-")
        extra = "; ".join(r.get("notes", []) + ([r["error"]] if "error" in r else []))
        verdict = ("yes" if r["ok"] else "NO") + (f" ({extra})" if extra else "")
        lines.append(f"| {r['model']} | {r.get('inputs', '')} | {worst(vs_cpu)} | {worst(vs_alone)} "
                     f"| {verdict} |")
    if report["overhead"]:
        lines += ["", "| model | in-process img/s b1 / best (b) | server c=1 img/s (ratio to b1) | "
                  "server dynamic img/s (ratio to max batch) | p50/p99 ms c=1 |",
                  "|---|---|---|---|---|"]
        for r in report["overhead"]:
            if "error" in r:
                lines.append(f"| {r['model']} | {r['error']} | | | |")
                continue
            ip, u, d = r["in_process"], r["unbatched"], r["dynamic"]
            lines.append(f"| {r['model']} | {ip[1]:.0f} / {ip[r['best_batch']]:.0f} ({r['best_batch']}) | "
                         f"{u['throughput']:.0f} ({u['ratio']:.2f}) | {d['throughput']:.0f} "
                         f"({d['ratio']:.2f}, c={d['concurrency']}) | "
                         f"{u['p50_us'] / 1e3:.2f} / {u['p99_us'] / 1e3:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    ap.add_argument("--models", type=pathlib.Path, default=REPO / "model_repository")
    ap.add_argument("--inputs", type=pathlib.Path, required=True)
    ap.add_argument("--perf", default="dgvit_fmnist,vit_fmnist,plug_deit_fmnist")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--json", type=pathlib.Path, required=True)
    ap.add_argument("--second-kind", default="KIND_GPU",
                    help="the second server's instances (KIND_CPU: a dry run without a GPU)")
    args = ap.parse_args()
    args.build, args.models, args.inputs = (p.resolve() for p in (args.build, args.models, args.inputs))
    server_harness.BUILD = args.build  # the server, op library and perf tool of this build
    tmp = pathlib.Path(tempfile.mkdtemp(dir=args.build))  # beside the models: hard links
    report = {"answers": [], "overhead": []}
    servers = {}
    try:
        for side, kind in (("cpu", "KIND_CPU"), ("gpu", args.second_kind)):
            write_repository(args.models, tmp / side, kind, args.max_batch)
            (tmp / f"{side}_run").mkdir()
            servers[side] = server_harness.start_server(
                tmp / f"{side}_run", tmp / side, extra=["--torch_threads=4"], env=server_env())
        clients = {s: Client(f"http://127.0.0.1:{srv.http_port}", timeout=120)
                   for s, srv in servers.items()}
        for model in sorted(p.name for p in args.models.iterdir() if p.is_dir()):
            try:
                gpu = clients["gpu"]
                kserve = gpu._json("GET", gpu._model_path(model, ""))  # KServe model metadata
                report["answers"].append(check_answers(model, clients, args.inputs, kserve["inputs"][0]["name"]))
            except Exception as e:  # one model's failure is reported, the others still run
                report["answers"].append({"model": model, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            print(report["answers"][-1], flush=True)
        for model in args.perf.split(","):
            if not (args.models / model).exists():
                continue
            try:
                report["overhead"].append(overhead(model, args, servers["gpu"].address))
            except Exception as e:
                report["overhead"].append({"model": model, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            print(report["overhead"][-1], flush=True)
    finally:
        for side, srv in servers.items():
            try:
                server_harness.stop_server(srv)
            except subprocess.TimeoutExpired:
                pass  # killed; its log still says why
            report[f"{side}_server_log_tail"] = srv.log()[-4000:]
        shutil.rmtree(tmp, ignore_errors=True)
        args.json.write_text(json.dumps(report, indent=1, default=str))
        args.json.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0 if report["answers"] and all(r["ok"] for r in report["answers"]) else 1


if __name__ == "__main__":
    sys.exit(main())
