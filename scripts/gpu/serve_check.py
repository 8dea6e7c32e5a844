#!/usr/bin/env python3
"""The server on a GPU (scripts/gpu/gpu_check.sh's `serve` stage; docs/gpu.md).

1. Answers: the same model repository served twice, every model once with a KIND_CPU and
   once with a KIND_GPU instance (two server processes); the same KServe v2 requests (a batch
   of carried inputs in one call, then each alone, concurrently, so that GPU batches form)
   go to both, and every output is compared: integer and string outputs exactly, floating
   ones by max |gpu - cpu| / max(1, |cpu|).
2. Overhead: for the models named by --perf, the in-process GPU throughput of the archive
   (torch.jit on CUDA, inputs copied in from pinned CPU memory and outputs copied back, as
   the server does) by batch size, against the GPU server driven by gatescope-perf, as
   benchmarks/bench_serving.py measures the CPU server:
   - unbatched: a copy of the model with batching off (max_batch_size 1), at concurrency 1
     and 4 (saturation), vs in-process batch 1; p99 at concurrency 1 vs the in-process
     batch-1 p50;
   - dynamic: the model with max_batch_size --max-batch and a 500 us delay, at --concurrency
     (default twice the largest batch, so that the next batch forms while one runs), with one
     GPU instance and with two, vs the in-process batch of the server's max_batch_size (the
     best batch is reported too); with --connections N above 1, once more with one instance
     and gatescope-perf's load spread over N gRPC connections instead of one; with
     --images-per-call M above 1, once more over those connections with M images in each
     KServe call, as many images in flight.
   Goal: >= 85 % for both. Each run's server-side breakdown comes from the server's own
   histograms (/metrics, before and after the run): time per request in the queue and in
   all, and per execution preparing inputs, in the model and delivering outputs, with the
   mean batch formed; beside it the in-process forward of the nearest batch size. The
   in-process batch 1 is also timed with 1 ms idle before each call, as a lone client's
   requests arrive: whether a forward after a wait is slower outside the server too.
3. CUDA graphs: a setup whose flags include --cuda_graphs reports, per model, how many
   graphs its server recorded (or why recording was turned off) and, after the overhead
   runs, checks its answers (by then mostly replays of recorded graphs) against the CPU
   server's from step 1. The models --graph-answers names (default the text model
   dgt_wordnet, whose calls such a server pads to whole length buckets) get the answers
   check too, without overhead runs, with the graphs their warm-up recorded and those their
   requests recorded counted apart.
4. The request path's ceiling: --floor names a stand-in whose forward is one small matrix
   product (scripts/gpu/prepare_carry.sh writes floor_fmnist). Each setup serves it after the
   --perf models, unbatched at concurrency 4 and dynamic at --concurrency (over one
   connection and over --connections): with a forward this cheap, its served rate is what
   the server and gatescope-perf reach on these CPUs at all, and the report sets it beside
   the rate each --perf model's 85 % goals ask for.
Writes --json and a markdown table next to it (.md); exits 1 when an answer differs.
"""
import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import re
import shutil
import signal
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


# The overhead runs' copies of a perf model: name suffix -> (batching, instances).
UNBATCHED, TWO_INSTANCES = "__unbatched", "__x2"
VARIANTS = {"": ("dynamic", 1), UNBATCHED: ("off", 1), TWO_INSTANCES: ("dynamic", 2)}


def copy_model(model, dst, kind, max_batch, batching="dynamic", count=1):
    """`model` as `dst`, with `count` `kind` instances; batching "dynamic" (max_batch_size
    `max_batch`, a 500 us delay instead of the delays tuned for a CPU) or "off"
    (max_batch_size 1)."""
    dst.mkdir()
    for version in (p for p in model.iterdir() if p.is_dir()):
        # Hard links (the server refuses version directories that resolve elsewhere).
        shutil.copytree(version, dst / version.name, copy_function=link_or_copy)
    config = (model / "config.pbtxt").read_text() if (model / "config.pbtxt").exists() else ""
    config = re.sub(r"instance_group\s*\[[^\]]*\]", "", config)
    if batching == "off":
        config = re.sub(r"dynamic_batching\s*\{[^}]*\}", "", config)
        config = re.sub(r"max_batch_size:\s*\d+", "", config) + "\nmax_batch_size: 1\n"
    else:
        config = re.sub(r"max_batch_size:\s*\d+", f"max_batch_size: {max_batch}", config)
        config = re.sub(r"preferred_batch_size:\s*\d+", "", config)
        config = re.sub(r"max_queue_delay_microseconds:\s*\d+",
                        "max_queue_delay_microseconds: 500", config)
    config += f"\ninstance_group [ {{ kind: {kind} count: {count} }} ]\n"
    (dst / "config.pbtxt").write_text(config)


def write_repository(models, out, kind, max_batch, perf=()):
    """A copy of `models` whose config.pbtxt gives every model one `kind` instance. Both
    copies batch alike, so that the same calls are valid on both. The models in `perf` also
    get their overhead variants (VARIANTS)."""
    out.mkdir(parents=True)
    for model in sorted(p for p in models.iterdir() if p.is_dir()):
        copy_model(model, out / model.name, kind, max_batch)
        if model.name in perf:
            for suffix, (batching, count) in VARIANTS.items():
                if suffix:
                    copy_model(model, out / f"{model.name}{suffix}", kind, max_batch, batching,
                               count)


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


def ask_alone(client, model, input_name, items):
    """Each item in a call of its own, all at once, so that batches form."""
    with cf.ThreadPoolExecutor(len(items)) as pool:
        return list(pool.map(lambda x: client.infer(model, {input_name: np.array([x], dtype=object)}), items))


def add_worst(errs, references, answers):
    """Keeps in `errs` the largest error of each output of `answers` against `references`."""
    for ref, got in zip(references, answers):
        for name, e in compare(ref, got).items():
            errs[name] = max(errs.get(name, 0.0), e)


def within_tolerance(errs, cpu_alone):
    """Floating outputs (an error's name may carry a suffix) within FLOAT_TOLERANCE, every
    other output exact."""
    floating = {name for name, a in cpu_alone[0].items() if a.dtype.kind == "f"}
    return all(e <= (FLOAT_TOLERANCE if name.split(" ")[0] in floating else 0.0)
               for name, e in errs.items())


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
        results[side] = together, ask_alone(client, model, input_name, items)
    _CPU_ANSWERS[model] = (input_name, *results["cpu"])
    errs = {}
    if results["cpu"][0] is not None and results["gpu"][0] is not None:
        errs = compare(results["cpu"][0], results["gpu"][0])
    add_worst(errs, results["cpu"][1], results["gpu"][1])
    # A batch on the GPU equals the same examples alone on the GPU.
    for i, g in enumerate(results["gpu"][1] if results["gpu"][0] is not None else []):
        row = {k: v[i:i + 1] for k, v in results["gpu"][0].items()}
        for name, e in compare(g, row).items():
            errs[f"{name} (gpu batch vs alone)"] = max(errs.get(f"{name} (gpu batch vs alone)", 0.0), e)
    ok = within_tolerance(errs, results["cpu"][1])
    return {"model": model, "inputs": f"{len(items)} {kind}", "ok": ok and not notes,
            "errors": errs, "notes": notes}


# The CPU server's answers of step 1, by model: (input name, the batch call or None, each
# alone).
_CPU_ANSWERS = {}


# The repository's line after each instance's warm-up: "<model> version <v> <instance>: ...".
_WARMED = re.compile(r"\] (\S+) version \S+ \S+: (warmed up|warm-up stopped)")


def _graph_lines(text):
    return [line for line in text.splitlines()
            if "recorded a CUDA graph" in line or "CUDA graphs off" in line]


def graph_report(log, model, since=0):
    """What a --cuda_graphs server's log says of `model` and its overhead variants: graphs
    recorded and why recording stopped. Models load one after another, each instance
    warming up (recording its graphs) before the repository's line for it, so the lines
    before a variant's warm-up line, back to the previous warm-up line, are its own; from
    `since` on (the model's runs) every such line counts."""
    variants = {model + suffix for suffix in VARIANTS}
    lines, pending = [], []
    for line in log[:since].splitlines():
        warmed = _WARMED.search(line)
        if warmed:
            if warmed.group(1) in variants:
                lines += pending
            pending = []
        elif _graph_lines(line):
            pending.append(line)
    lines += _graph_lines(log[since:])
    return {"recorded": sum("recorded a CUDA graph" in line for line in lines),
            "off": [line.split("] ", 1)[-1][:300] for line in lines if "CUDA graphs off" in line]}


def check_graph_answers(model, client, inputs_dir):
    """The answers of a --cuda_graphs server against the CPU server's. The batch call is
    repeated so that its shape runs eagerly, is recorded and is then replayed; the calls
    alone form batches of the sizes the overhead runs recorded."""
    input_name, cpu_together, cpu_alone = _CPU_ANSWERS[model]
    _, items = inputs_for(model, inputs_dir)
    errs = {}
    if cpu_together is not None:
        for _ in range(4):
            together = client.infer(model, {input_name: np.array(items, dtype=object)})
        errs = compare(cpu_together, together)
    add_worst(errs, cpu_alone, ask_alone(client, model, input_name, items))
    return {"ok": within_tolerance(errs, cpu_alone), "errors": errs}


def graph_answers_only(model, server, setup, inputs_dir):
    """check_graph_answers for a model without overhead runs, on a --cuda_graphs server:
    the graphs its warm-up recorded, those the check's own requests recorded (none when
    warm-up covered every shape its calls take), and the answers against the CPU server's."""
    row = {"model": model, "setup": setup}
    if model not in _CPU_ANSWERS:
        row["error"] = "no CPU answers to compare with (step 1 did not run for it)"
        return row
    since = len(server.log())
    try:
        row["graph_answers"] = check_graph_answers(
            model, Client(f"http://127.0.0.1:{server.http_port}", timeout=120), inputs_dir)
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    log = server.log()
    row["cuda_graphs"] = graph_report(log, model, since)
    row["recorded_on_requests"] = sum("recorded a CUDA graph" in line
                                      for line in _graph_lines(log[since:]))
    return row


def timed(call, seconds, idle_s=0.0):
    """(calls per second, p50 ms of one call) of `call` repeated for `seconds`. With
    `idle_s`, each call follows that much sleep, as a lone client's requests reach an
    unbatched server (the forward after a wait, whose slowdown the served concurrency-1 runs
    showed: docs/gpu.md); the rate then counts the sleeps too."""
    times, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if idle_s:
            time.sleep(idle_s)
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return len(times) / (time.perf_counter() - t0), 1e3 * float(np.median(times))


def graphed(torch, module, host, device_input):
    """A call that replays `module`'s forward on `device_input` as a CUDA graph after copying
    `host` into it, and the largest |graph - eager| of the outputs; raises when the forward
    cannot be captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
        for _ in range(3):
            eager = module(device_input)
    torch.cuda.current_stream().wait_stream(side)
    eager = {k: v.to("cpu") for k, v in eager.items()}
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = module(device_input)

    def call():
        device_input.copy_(host, non_blocking=True)
        graph.replay()
        return {k: v.to("cpu") for k, v in static_out.items()}  # waits for the device

    replayed = call()
    diff = max(float((replayed[k].double() - eager[k].double()).abs().max()) if eager[k].numel()
               else 0.0 for k in eager)
    return call, diff


def in_process(model_path, example, batches, device, seconds=0.5):
    """({batch: (images/s, p50 ms of one call)} of the archive on `device`, copies in and
    out included; on CUDA {batch: (images/s, p50 ms, max |graph - eager|) or an error}
    with the forward replayed as a CUDA graph (what the launch cost of a small model
    leaves out); the batch-1 p50 ms when each call follows 1 ms idle)."""
    import torch
    torch.set_num_threads(len(os.sched_getaffinity(0)))  # the CPUs the servers have too
    # Full float32, as GPU instances compute (gpu_device_cuda.cc turns TF32 off).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.ops.load_library(os.environ["GATESCOPE_OPS_LIB"])
    module = torch.jit.load(str(model_path), map_location=device).eval()
    out, graphs, idle_p50 = {}, {}, None
    with torch.inference_mode():
        hosts = {}
        for b in batches:
            host = example.expand(b, *example.shape[1:]).contiguous()
            hosts[b] = host = host.pin_memory() if device == "cuda" else host

            def call():
                y = module(host.to(device, non_blocking=True))
                return {k: v.to("cpu") for k, v in y.items()}  # waits for the device
            for _ in range(3):
                call()
            rate, p50 = timed(call, seconds)
            out[b] = (rate * b, p50)
            if b == 1:
                idle_p50 = timed(call, seconds, idle_s=0.001)[1]
        # After every eager size: a capture that fails cannot disturb those.
        for b, host in hosts.items() if device == "cuda" else ():
            try:
                replay, diff = graphed(torch, module, host, host.to(device))
                rate, p50 = timed(replay, seconds)
                graphs[b] = (rate * b, p50, diff)
            except Exception as e:  # a forward that cannot be captured says why
                graphs[b] = f"{type(e).__name__}: {str(e)[:200]}"
    return out, graphs, idle_p50


def cpu_set(text):
    """The CPUs of a taskset-style list ("0-7,12")."""
    cpus = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def perf_server(build, address, model, files, concurrency, cpus="", connections=1, per_call=1):
    """gatescope-perf's JSON line; per_call above 1 sends that many images per KServe call."""
    cmd = ["taskset", "-c", cpus] if cpus else []
    api = ["--api=kserve", f"--batch-size={per_call}"] if per_call > 1 else []
    cmd += [str(build / "client" / "gatescope-perf"), "--server", address, "--model", model,
           f"--concurrency={concurrency}", f"--connections={connections}", *api,
           "--warmup-ms=700", "--window-ms=1000",
           "--max-windows=4", "--format=json", *map(str, files)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(server_env() or {})})
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"gatescope-perf failed: {done.stderr[-800:]}")
    return json.loads(lines[-1])


STAGES = ("request", "queue", "compute_input", "compute_infer", "compute_output")


def server_counters(metrics_port, model):
    """{series: value} of `model`'s stage histograms' sums and counts and its inference and
    execution counters, summed over their other labels."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                  timeout=10).read().decode()
    want = re.compile(r'^gatescope_(\w+)\{([^}]*)\} (\S+)$')
    out = {}
    for line in text.splitlines():
        m = want.match(line)
        if m and f'model="{model}"' in m.group(2).split(","):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def breakdown(before, after):
    """Per request: `request` and `queue` ms; per execution: `compute_*` ms; `batch`: the
    mean requests per execution (warm-up included)."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    out = {}
    for stage in STAGES:
        n = d.get(f"{stage}_duration_seconds_count", 0.0)
        out[stage] = 1e3 * d.get(f"{stage}_duration_seconds_sum", 0.0) / n if n else None
    execs = d.get("executions_total", 0.0)
    out["batch"] = d.get("inferences_total", 0.0) / execs if execs else None
    return out


_IN_PROCESS = {}


def overhead(model, args, gpu, setup):
    import torch
    from gatescope.data.png import decode_png
    _, files = input_files(model, args.inputs)
    if model not in _IN_PROCESS:  # once per model, on this process's CPUs (--server-cpus)
        pixels = decode_png(files[0].read_bytes()).astype(np.float32) / 255.0
        example = torch.from_numpy(pixels).view(1, 1, *pixels.shape)
        device = "cuda" if args.second_kind == "KIND_GPU" else "cpu"
        batches = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b <= 2 * args.max_batch}
                         | {args.max_batch})
        _IN_PROCESS[model] = in_process(args.models / model / "1" / "model.pt", example,
                                        batches, device)
    own, graphs, idle_p50 = _IN_PROCESS[model]
    best_batch = max(own, key=lambda b: own[b][0])
    row = {"model": model, "setup": setup, "in_process": own, "in_process_cuda_graphs": graphs,
           "in_process_b1_after_idle_ms": idle_p50,
           "best_batch": best_batch, "runs": []}
    concurrency = args.concurrency or 2 * args.max_batch
    # Unbatched at 1 and at saturation vs batch 1; dynamic vs the largest batch it may form.
    # The last two elements: gatescope-perf's gRPC connections and images per call.
    runs = [("unbatched", UNBATCHED, 1, 1, 1, 1), ("unbatched", UNBATCHED, 4, 1, 1, 1),
            ("dynamic", "", concurrency, args.max_batch, 1, 1)]
    if args.connections > 1:
        runs.append((f"dynamic, {args.connections} connections", "", concurrency,
                     args.max_batch, args.connections, 1))
    if args.images_per_call > 1:  # as many images in flight as the other dynamic runs
        calls = max(args.connections, concurrency // args.images_per_call)
        runs.append((f"dynamic, {args.connections} connections, {args.images_per_call} "
                     "images per call", "", calls, args.max_batch, args.connections,
                     args.images_per_call))
    runs.append(("dynamic, 2 instances", TWO_INSTANCES, concurrency, args.max_batch, 1, 1))
    if model == args.floor:  # the ceilings only: saturated, one instance
        runs = [r for r in runs if r[2] > 1 and r[1] != TWO_INSTANCES]
    for label, suffix, c, ref, connections, per_call in runs:
        served = model + suffix
        before = server_counters(gpu.metrics_port, served)
        r = perf_server(args.build, gpu.address, served, files, c, args.client_cpus, connections,
                        per_call)
        stages = breakdown(before, server_counters(gpu.metrics_port, served))
        near = min(own, key=lambda b: abs(b - (stages["batch"] or 1)))
        images = r.get("inferences_per_s", r["throughput"])  # throughput counts calls
        row["runs"].append({
            "run": label, "concurrency": c, "connections": r.get("connections", connections),
            "images_per_call": per_call, "throughput": images, "p50_us": r["p50_us"],
            "p99_us": r["p99_us"], "reference": own[ref][0], "reference_batch": ref,
            "ratio": images / own[ref][0], "server": stages,
            "in_process_forward_ms": {"batch": near, "p50_ms": own[near][1]}})
    return row


def ceilings(report):
    """Lines setting each setup's served rates of the floor model (report["floor"]) beside
    what the 85 % goals ask of the other models in that setup."""
    rows = [r for r in report["overhead"] if "runs" in r]
    lines = []
    for floor in (r for r in rows if r["model"] == report.get("floor")):
        reached = {u["run"]: u["throughput"] for u in floor["runs"]}
        for r in rows:
            if r["setup"] != floor["setup"] or r is floor:
                continue
            need = {u["run"]: 0.85 * u["reference"] for u in r["runs"] if u["concurrency"] > 1}
            said = "; ".join(
                f"{run}: the goal needs {need[run]:.0f}/s, the stand-in reached "
                f"{reached[run]:.0f}/s ({reached[run] / need[run]:.2f}x)"
                for run in need if run in reached)
            lines.append(f"- {floor['setup']}, {r['model']}: {said}")
    if lines:
        lines.insert(0, f"\nRequest path ceiling ({report['floor']}, a forward of one small "
                        "matrix product; below 1x, these CPUs cannot reach the goal whatever "
                        "the model):")
    return lines


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
        lines += ["", "| model | setup | run | c | server img/s | in-process img/s (batch) | ratio | "
                  "p50 / p99 ms | server per request: total / queue ms | mean batch | "
                  "per execution: input / model / output ms | in-process forward ms (batch) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        fmt = (lambda v, f="{:.2f}": "-" if v is None else f.format(v))
        for r in report["overhead"]:
            if "error" in r:
                error = " ".join(str(r["error"]).split())  # one table row
                lines.append(f"| {r['model']} | {r.get('setup', '')} | {error} | | | | | | | | | |")
                continue
            for u in r["runs"]:
                st = u["server"]
                lines.append(
                    f"| {r['model']} | {r['setup']} | {u['run']} | {u['concurrency']} | {u['throughput']:.0f} | "
                    f"{u['reference']:.0f} ({u['reference_batch']}) | {u['ratio']:.2f} | "
                    f"{u['p50_us'] / 1e3:.2f} / {u['p99_us'] / 1e3:.2f} | "
                    f"{fmt(st['request'])} / {fmt(st['queue'])} | {fmt(st['batch'], '{:.1f}')} | "
                    f"{fmt(st['compute_input'])} / {fmt(st['compute_infer'])} / "
                    f"{fmt(st['compute_output'])} | {u['in_process_forward_ms']['p50_ms']:.2f} "
                    f"({u['in_process_forward_ms']['batch']}) |")
            ip = r["in_process"]
            lines.append(f"| {r['model']} | {r['setup']} | in-process by batch: " + ", ".join(
                f"{b}: {v[0]:.0f}/s {v[1]:.2f} ms" for b, v in ip.items())
                + ("" if r.get("in_process_b1_after_idle_ms") is None else
                   f"; batch 1 after 1 ms idle: {r['in_process_b1_after_idle_ms']:.2f} ms")
                + " | | | | | | | | | |")
            if "cuda_graphs" in r:
                g = r["cuda_graphs"]
                answers = r.get("graph_answers")
                said = (f"{g['recorded']} graphs recorded" + (f"; off: {g['off'][0]}" if g["off"] else "")
                        + ("" if answers is None else
                           f"; answers vs CPU {'ok' if answers['ok'] else 'DIFFER'}, worst "
                           f"{max(answers['errors'].values(), default=0.0):.1e}"))
                lines.append(f"| {r['model']} | {r['setup']} | server CUDA graphs: "
                             f"{' '.join(said.split())} | | | | | | | | | |")
            graphs = r.get("in_process_cuda_graphs") or {}
            if graphs:
                lines.append(f"| {r['model']} | {r['setup']} | in-process, CUDA graphs: " + ", ".join(
                    f"{b}: {v[0]:.0f}/s {v[1]:.2f} ms (max diff {v[2]:.1e})" if isinstance(v, tuple)
                    else f"{b}: {v}" for b, v in graphs.items()) + " | | | | | | | | | |")
    if report.get("graph_answers"):
        lines += ["", "| model | setup | CUDA graphs: at load / on requests | why off | "
                  "answers vs CPU (worst) |", "|---|---|---|---|---|"]
        for r in report["graph_answers"]:
            g = r.get("cuda_graphs")
            answers = r.get("graph_answers")
            said = (r["error"] if "error" in r else
                    f"{'ok' if answers['ok'] else 'DIFFER'} "
                    f"({max(answers['errors'].values(), default=0.0):.1e})")
            on_requests = r.get("recorded_on_requests", 0)
            counts = "-" if g is None else f"{g['recorded'] - on_requests} / {on_requests}"
            off = " ".join(g["off"][0].split()) if g and g["off"] else "-"
            lines.append(f"| {r['model']} | {r['setup']} | {counts} | {off} | "
                         f"{' '.join(said.split())} |")
    lines += ceilings(report)
    return "\n".join(lines) + "\n"


def stop(servers, name, report):
    """Stops servers[name] and keeps its log's tail in the report."""
    srv = servers.pop(name)
    try:
        server_harness.stop_server(srv)
    except subprocess.TimeoutExpired:
        pass  # killed; its log still says why
    report[f"{name}_server_log_tail"] = srv.log()[-4000:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    ap.add_argument("--models", type=pathlib.Path, default=REPO / "model_repository")
    ap.add_argument("--inputs", type=pathlib.Path, required=True)
    ap.add_argument("--perf", default="dgvit_fmnist,vit_fmnist,plug_deit_fmnist")
    ap.add_argument("--concurrency", type=int, default=0,
                    help="of the dynamic runs (default: twice --max-batch)")
    ap.add_argument("--connections", type=int, default=1,
                    help="above 1: each model's dynamic run is repeated with gatescope-perf's "
                         "load spread over this many gRPC connections (one carries all by "
                         "default, and can bound the rate before the server does)")
    ap.add_argument("--images-per-call", type=int, default=1,
                    help="above 1: one more dynamic run whose KServe calls carry this many "
                         "images each, over --connections (the request path's cost is per call)")
    ap.add_argument("--floor", default="floor_fmnist",
                    help="the request path's stand-in, served in every setup when --models "
                         "holds it (empty: none)")
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--json", type=pathlib.Path, required=True)
    ap.add_argument("--second-kind", default="KIND_GPU",
                    help="the second server's instances (KIND_CPU: a dry run without a GPU)")
    ap.add_argument("--server-cpus", default="",
                    help="CPUs of the servers and the in-process runs (taskset list; default all)")
    ap.add_argument("--client-cpus", default="", help="CPUs of gatescope-perf (default all)")
    ap.add_argument("--setup", action="append", default=[], metavar="NAME=FLAGS",
                    help="a GPU server for the overhead runs, started with these flags "
                         "(separated by ;) and the server's defaults otherwise; repeatable; "
                         "default one, 'default='")
    ap.add_argument("--graph-answers", default="dgt_wordnet",
                    help="models beyond --perf whose answers a --cuda_graphs setup checks "
                         "against the CPU server's (comma-separated; empty: none)")
    ap.add_argument("--no-answers", action="store_true", help="only the overhead runs")
    args = ap.parse_args()
    # The stage's time limit ends this script with SIGTERM: unwind, so that what was
    # measured is written and the servers are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    if args.server_cpus:
        os.sched_setaffinity(0, cpu_set(args.server_cpus))  # the servers inherit it
    setups = [x.partition("=")[::2] for x in args.setup] or [("default", "")]
    args.build, args.models, args.inputs = (p.resolve() for p in (args.build, args.models, args.inputs))
    server_harness.BUILD = args.build  # the server, op library and perf tool of this build
    tmp = pathlib.Path(tempfile.mkdtemp(dir=args.build))  # beside the models: hard links
    perf_models = [m for m in args.perf.split(",") if (args.models / m).exists()]
    if args.floor and (args.models / args.floor).exists() and args.floor not in perf_models:
        perf_models.append(args.floor)  # last: the models' own runs come first
    # Checked against step 1's CPU answers, so not with --no-answers.
    graph_only = [] if args.no_answers else [
        m for m in filter(None, args.graph_answers.split(","))
        if (args.models / m).exists() and m not in perf_models]
    report = {"answers": [], "overhead": [], "graph_answers": [], "setups": dict(setups),
              "floor": args.floor,
              "server_cpus": args.server_cpus, "client_cpus": args.client_cpus}
    servers = {}
    try:
        for side, kind in (("cpu", "KIND_CPU"), ("gpu", args.second_kind)):
            perf = perf_models if side == "gpu" else ()
            write_repository(args.models, tmp / side, kind, args.max_batch, perf)
            if args.no_answers:
                continue
            (tmp / f"{side}_run").mkdir()
            servers[side] = server_harness.start_server(
                tmp / f"{side}_run", tmp / side, extra=["--torch_threads=4"], env=server_env())
        clients = {s: Client(f"http://127.0.0.1:{srv.http_port}", timeout=120)
                   for s, srv in servers.items()}
        for model in sorted(p.name for p in args.models.iterdir() if p.is_dir()):
            if args.no_answers:
                break
            try:
                gpu = clients["gpu"]
                kserve = gpu._json("GET", gpu._model_path(model, ""))  # KServe model metadata
                report["answers"].append(check_answers(model, clients, args.inputs, kserve["inputs"][0]["name"]))
            except Exception as e:  # one model's failure is reported, the others still run
                report["answers"].append({"model": model, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            print(report["answers"][-1], flush=True)
        for side in list(servers):  # the overhead runs have the CPUs and the GPU alone
            stop(servers, side, report)
        for name, flags in setups:
            run_dir = tmp / f"gpu_{name}_run"
            run_dir.mkdir()
            try:
                # --torch_threads=0 undoes the harness's fixed count: the server's own default
                # unless the setup names one.
                servers[name] = server_harness.start_server(
                    run_dir, tmp / "gpu", extra=["--torch_threads=0", *filter(None, flags.split(";"))],
                    env=server_env())
            except RuntimeError as e:  # this setup's server did not start; the others still run
                report["overhead"].append({"model": "-", "setup": name,
                                           "error": f"server did not start: {str(e)[-300:]}"})
                continue
            graphs = "--cuda_graphs" in flags.split(";")
            for model in perf_models:
                log_from = len(servers[name].log())
                try:
                    report["overhead"].append(overhead(model, args, servers[name], name))
                    row = report["overhead"][-1]
                    if graphs and model in _CPU_ANSWERS:
                        row["graph_answers"] = check_graph_answers(
                            model, Client(f"http://127.0.0.1:{servers[name].http_port}", timeout=120),
                            args.inputs)
                    if graphs:
                        row["cuda_graphs"] = graph_report(servers[name].log(), model, log_from)
                except Exception as e:
                    report["overhead"].append({"model": model, "setup": name,
                                               "error": f"{type(e).__name__}: {str(e)[:300]}"})
                print(report["overhead"][-1], flush=True)
            for model in graph_only if graphs else ():
                report["graph_answers"].append(
                    graph_answers_only(model, servers[name], name, args.inputs))
                print(report["graph_answers"][-1], flush=True)
            stop(servers, name, report)
    finally:
        # Written before and after the servers stop: a stop that outlives the stage's limit
        # still leaves the figures.
        args.json.write_text(json.dumps(report, indent=1, default=str))
        args.json.with_suffix(".md").write_text(markdown(report))
        for side in list(servers):
            stop(servers, side, report)
        shutil.rmtree(tmp, ignore_errors=True)
        args.json.write_text(json.dumps(report, indent=1, default=str))
    print(markdown(report))
    answered = args.no_answers or (report["answers"] and all(r["ok"] for r in report["answers"]))
    measured = not any("error" in r or not r.get("graph_answers", {"ok": True})["ok"]
                       for r in report["overhead"] + report["graph_answers"])
    return 0 if answered and measured else 1


if __name__ == "__main__":
    sys.exit(main())
