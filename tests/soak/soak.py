#!/usr/bin/python3
"""Soak and fault run of the real gatescope-server (docs/soak.md).

Phases, each with bounds that make the run fail (exit 1) when violated:

1. saturation: every model of the repository, both APIs (gatescope.v1 Predict, KServe
   ModelInfer), closed-loop at --concurrency for --duration s; every answer checked against
   its input's reference (tests/soak/soak_workload.py); RSS sampled from /proc.
2. restart: SIGKILL under load, restart on the same repository and ports; time to
   listening, grpc.health SERVING, KServe ServerReady, first correct answer, every model
   correct, traffic resumed.
3. explain storm: concurrent Explain calls (and KServe explain) mixed with predictions.
4. cancellation storm: calls with 1-50 ms deadlines and calls cancelled by the client;
   then the queues must drain (gatescope_pending_requests 0) and every model answer
   correctly.
5. graceful stop (SIGINT) exits 0.
6. poll faults: a server with --model_control=poll --repository_poll_seconds=1 on a copy
   of one model; under traffic a corrupt version, an empty and a truncated model.pt appear,
   the truncated one is completed, then versions are removed.

Prints one JSON summary on stdout (progress on stderr); exit 0 when every bound held,
1 when one did not, 2 for a setup problem.

  /usr/bin/python3 tests/soak/soak.py --mode short            # ~2.5 min on 2 cores
  /usr/bin/python3 tests/soak/soak.py --mode long --json-out soak.json   # ~40 min
"""
import argparse
import heapq
import json
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import time
import traceback

# OpenBLAS's kernels as the server chooses them, before numpy or torch loads OpenBLAS: the
# Python references (soak_workload.python_references) then come from the server's kernels.
from gatescope import blas_core  # noqa: E402

blas_core.use_server_blas_core()
import grpc  # noqa: E402
import numpy as np  # noqa: E402

import soak_server as srv
import soak_traffic as tr
import soak_workload as wl

MODES = {
    "short": dict(duration=80, warmup=50, checkpoint_s=10, rss_growth_mib=128.0,
                  concurrency=24, explain_s=8, cancel_s=8,
                  restarts=1, poll_cycles=1,
                  inputs={"classifier": 16, "segmenter": 4, "detector": 6}),
    "long": dict(duration=1800, warmup=300, checkpoint_s=60, rss_growth_mib=64.0,
                 concurrency=32, explain_s=120, cancel_s=120,
                 restarts=3, poll_cycles=5,
                 inputs={"classifier": 64, "segmenter": 10, "detector": 12}),
}


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Run:
    def __init__(self, args):
        self.args = args
        self.violations = []
        self.summary = {"mode": args.mode,
                        "machine": {"cpus": os.cpu_count(),
                                    "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]},
                        "settings": {k: getattr(args, k) for k in (
                            "duration", "warmup", "checkpoint_s", "settle_mib", "concurrency",
                            "explain_s", "cancel_s", "restarts", "poll_cycles",
                            "server_flags")},
                        "bounds": {"wrong": 0, "lost": 0,
                                   "saturation_errors": 0,
                                   "idle_rss_growth_after_warmup_mib": args.rss_growth_mib,
                                   "peak_rss_mib": args.rss_peak_mib,
                                   "restart_first_answer_s": args.restart_bound_s,
                                   "drain_s": args.drain_bound_s,
                                   "poll_error_fraction": args.poll_error_fraction}}

    def violate(self, phase, what):
        log(f"VIOLATION [{phase}] {what}")
        self.violations.append(f"{phase}: {what}")

    def check_counts(self, phase, totals, allowed_codes=(), max_errors=None):
        if totals["wrong"]:
            self.violate(phase, f"{totals['wrong']} wrong answers")
        if totals["lost"]:
            self.violate(phase, f"{totals['lost']} lost requests")
        bad = {c: n for c, n in totals["errors"].items() if c not in allowed_codes}
        if bad:
            self.violate(phase, f"errors not allowed here: {bad}")
        if max_errors is not None and totals["errors_total"] > max_errors:
            self.violate(phase, f"{totals['errors_total']} errors > bound {max_errors}")


# ------------------------------------------------------------------------- helpers

def served_models(apis, stubs):
    """{name: (version, config)} of the ready models, and the not-ready ones."""
    ready, not_ready = {}, []
    for m in stubs.v1.ListModels(apis.v1.ListModelsRequest(), timeout=30).models:
        if not m.ready:
            not_ready.append(f"{m.name}/{m.version}")
            continue
        meta = stubs.v1.GetModelMetadata(
            apis.v1.ModelMetadataRequest(model_name=m.name), timeout=30)
        ready[m.name] = (m.version, meta.config)
    return ready, not_ready


def repository_models(repository):
    return sorted(p.name for p in pathlib.Path(repository).iterdir()
                  if p.is_dir() and any(v.is_dir() and v.name.isdigit() for v in p.iterdir()))


def requests_total(server):
    return srv.per_model(server.metrics(), "gatescope_requests_total")


def requests_by_code(server, code):
    return srv.per_model(server.metrics(), "gatescope_requests_total", code=code)


def pending(server):
    return srv.per_model(server.metrics(), "gatescope_pending_requests")


def await_drained(server, timeout):
    """Seconds until every gatescope_pending_requests is 0 (None if never)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        p = pending(server)
        if p and all(v == 0 for v in p.values()):
            return round(time.time() - t0, 2), p
        time.sleep(0.05)
    return None, pending(server)


def correctness_sweep(apis, plans, stubs, per_model=3):
    """Sequential v1 Predict and KServe ModelInfer of the first inputs of every model;
    returns the problems."""
    problems = []
    for p in plans.values():
        for i in range(min(per_model, len(p.inputs))):
            for call in (wl.v1_predict(apis, p, i, "png"),
                         wl.kserve_infer(apis, p, [i], "uint8")):
                try:
                    problem = wl.check(call, call.invoke(stubs, 60))
                except grpc.RpcError as e:
                    problem = f"{e.code().name}: {e.details()}"
                if problem:
                    problems.append(f"{p.name} {call.api} input {i}: {problem}")
    return problems


# -------------------------------------------------------------------------- phases

def phase_setup(run, apis, server, stubs):
    a = run.args
    t0 = time.time()
    metadata, not_ready = served_models(apis, stubs)
    on_disk = repository_models(a.repository)
    missing = sorted(set(on_disk) - set(metadata))
    if not_ready or missing:
        run.violate("setup", f"models not ready: {not_ready or missing}")
    # Text models load and stay ready through every phase, but no soak traffic drives them
    # yet (the workloads are image inputs); they are listed as such in the summary.
    undriven = sorted(n for n, (_, c) in metadata.items() if c.task not in wl.FAMILIES)
    if undriven:
        print(f"soak: no workload yet for {', '.join(undriven)} (text): loaded, not driven",
              file=sys.stderr)
    plans = wl.build_plans({n: m for n, m in metadata.items() if n not in undriven}, a.inputs)
    wl.server_references(apis, plans, stubs)
    ref_s = time.time() - t0
    info = {"models": {p.name: {"family": p.family, "version": p.version,
                                "inputs": len(p.inputs)} for p in plans.values()},
            "server_reference_s": round(ref_s, 1), "not_driven": undriven}
    if a.python_reference:
        t1 = time.time()
        problems = wl.python_references(plans, pathlib.Path(a.repository))
        info["python_reference_s"] = round(time.time() - t1, 1)
        info["python_mismatches"] = {m: sum(x is not None for x in v) for m, v in
                                     problems.items()}
        for m, v in problems.items():
            for i, x in enumerate(v):
                if x:
                    run.violate("reference", f"{m} input {i}: served reference differs from "
                                             f"the Python model: {x}")
    run.summary["models"] = sorted(plans)
    run.summary["references"] = info
    log(f"references of {len(plans)} models in {ref_s:.1f} s")
    return plans


def phase_saturation(run, apis, plans, server, sampler):
    a = run.args
    stubs_list = [srv.Stubs(apis, server.address) for _ in range(4)]
    before = requests_total(server)
    traffic = tr.TrafficGroup(apis, plans, stubs_list, a.concurrency, timeout=60, seed=a.seed)
    log(f"saturation: {len(plans)} models, both APIs, concurrency {a.concurrency} "
        f"({traffic.split}), {a.duration} s")
    t0 = time.time()
    traffic.start()
    # Idle-RSS checkpoints every checkpoint_s and at the end. Live RSS swings by ~100 MiB
    # with what is being batched at the moment of the sample; the idle RSS (no call in
    # flight, queues empty) is what a leak raises. It still dips by up to ~60 MiB now and
    # then (the allocator returning memory) but its ceiling (the highest idle RSS so far)
    # rises only while the server warms up: shape-specialised plans and buffers of every
    # batch size, input size and model instance, allocator arenas. The warm-up ends at the
    # first checkpoint where the ceiling rose less than settle_mib over the last two
    # intervals, or at the first one past --warmup; the growth bounded is the ceiling's from
    # there to the end.
    marks = []
    while (marks[-1] if marks else 0) + a.checkpoint_s < a.duration:
        marks.append((marks[-1] if marks else 0) + a.checkpoint_s)
    marks.append(a.duration)
    checkpoints = []
    warmup_index = None
    active = 0.0  # seconds of traffic, pauses excluded
    last = time.time()
    while active < a.duration:
        time.sleep(0.25)
        now = time.time()
        active += now - last
        last = now
        if not server.alive():
            run.violate("saturation", f"server died (exit {server.proc.returncode})")
            break
        if marks and active >= marks[0]:
            marks.pop(0)
            paused = traffic.pause()
            drained, _ = await_drained(server, a.drain_bound_s)
            time.sleep(0.3)
            idle = []
            for _ in range(5):
                idle.append(server.rss_mib())
                time.sleep(0.1)
            cp = {"at_s": round(active), "idle_rss_mib": round(float(np.median(idle)), 1),
                  "quiesce_s": paused, "drained_s": drained, "t": time.time()}
            checkpoints.append(cp)
            ceiling = [max(c["idle_rss_mib"] for c in checkpoints[:k + 1])
                       for k in range(len(checkpoints))]
            settled = len(ceiling) >= 3 and ceiling[-1] - ceiling[-3] < a.settle_mib
            if warmup_index is None and active < a.duration - 1 and (
                    active >= a.warmup or settled):
                warmup_index = len(checkpoints) - 1
            log(f"saturation checkpoint at {active:.0f} s: idle RSS {cp['idle_rss_mib']} MiB"
                + (" (warm-up ends)" if warmup_index == len(checkpoints) - 1 else ""))
            traffic.resume()
            last = time.time()
    stats = traffic.stop()
    t1 = time.time()
    for s in stubs_list:
        s.close()
    totals = stats.totals()
    per = stats.per_model_api()
    after = requests_total(server) if server.alive() else {}
    # The server's own count of finished requests per model equals what the clients saw.
    mismatched = {}
    for model, apis_rows in per.items():
        client = sum(r["sent"] - r["lost"] for r in apis_rows.values())
        counted = after.get(model, 0) - before.get(model, 0)
        if client != counted:
            mismatched[model] = {"client": client, "server": counted}
    warm = checkpoints[warmup_index] if warmup_index is not None else None
    rss = srv.rss_report([(t, r) for t, r in sampler.samples if t0 <= t <= t1],
                         warm["t"] if warm else t1)
    rss["vm_hwm_mib"] = round((server.status_kib("VmHWM") or 0) / 1024, 1)
    rss["bound_mib"] = a.rss_growth_mib
    growth = None
    if warm is not None and warmup_index < len(checkpoints) - 1:
        ys = [c["idle_rss_mib"] for c in checkpoints]
        growth = round(max(ys) - max(ys[:warmup_index + 1]), 1)
        after = checkpoints[warmup_index:]
        x = np.array([c["at_s"] for c in after], float)
        y = np.array([c["idle_rss_mib"] for c in after], float)
        rss["idle_fit_mib_per_min"] = round(float(np.polyfit(x, y, 1)[0]) * 60, 2)
        rss["idle_last_minus_warm_mib"] = round(float(y[-1] - y[0]), 1)
    rss["warmup_end_s"] = warm["at_s"] if warm else None
    rss["idle_growth_after_warmup_mib"] = growth
    for cp in checkpoints:
        cp.pop("t")
    rss["checkpoints"] = checkpoints
    out = {"seconds": round(active, 1), "wall_s": round(t1 - t0, 1),
           "workers_per_family": traffic.split, **totals,
           "requests_per_s": round(totals["sent"] / max(active, 1e-9), 1),
           "latency_ms": stats.latency_ms(),
           "latency_ms_per_model": {m: stats.latency_ms(m) for m in sorted(plans)},
           "per_model": per,
           "server_count_mismatch": mismatched, "rss": rss, "examples": stats.examples}
    run.summary["saturation"] = out
    run.check_counts("saturation", totals)  # every error counts: see docs/soak.md
    for m in plans:
        for api in ("v1", "kserve"):
            if per.get(m, {}).get(api, {}).get("ok", 0) < a.min_ok:
                run.violate("saturation", f"{m} {api}: fewer than {a.min_ok} correct answers")
    if mismatched:
        run.violate("saturation", f"server request counts differ from the client's: "
                                  f"{mismatched}")
    if rss["vm_hwm_mib"] > a.rss_peak_mib:
        run.violate("saturation", f"peak RSS {rss['vm_hwm_mib']} MiB > {a.rss_peak_mib:.0f}")
    if growth is None:
        run.violate("saturation", "no idle RSS checkpoints after warm-up")
    elif growth > a.rss_growth_mib:
        run.violate("saturation", f"idle RSS grew {growth} MiB after warm-up > "
                                  f"{a.rss_growth_mib}")
    log(f"saturation: sent {totals['sent']} ok {totals['ok']} wrong {totals['wrong']} "
        f"lost {totals['lost']} errors {totals['errors']}; RSS {rss.get('start_mib')} -> "
        f"peak {rss.get('peak_mib')} -> end {rss.get('end_mib')} MiB")


def phase_restart(run, apis, plans, server, cycle):
    a = run.args
    stats = tr.Stats(track_times=True)
    stubs_list = [srv.Stubs(apis, server.address) for _ in range(2)]
    traffic = tr.TrafficGroup(apis, plans, stubs_list, 8, timeout=60,
                              seed=a.seed + 1000 + cycle, stats=stats).start()
    time.sleep(3)
    grpc_port, metrics_port = server.grpc_port, server.metrics_port
    old_pid = server.pid
    in_flight = sum(sum(g.in_flight.values()) for g in traffic.groups)
    t_kill = time.time()
    server.kill9()
    t_dead = time.time()
    attempts = 0
    while True:  # restart at once, as a supervisor would, on the same ports
        attempts += 1
        server.spawn(grpc_port, metrics_port)
        if server.wait_listening():
            break
        if attempts >= 10:
            raise RuntimeError(f"restart failed {attempts} times: {server.log_path}")
        time.sleep(0.5)
    t_listen = time.time()
    probe = srv.Stubs(apis, server.address)
    health = ready = first = None
    probe_errors = []
    first_plan = next(p for p in plans.values() if p.family == "classifier")
    deadline = t_kill + 120
    while time.time() < deadline and None in (health, ready, first):
        try:
            if health is None and probe.health.Check(
                    apis.health.HealthCheckRequest(service=""), timeout=1).status == 1:
                health = time.time()
            if ready is None and probe.kv.ServerReady(apis.kv.ServerReadyRequest(),
                                                      timeout=1).ready:
                ready = time.time()
            if first is None:
                call = wl.v1_predict(apis, first_plan, 0, "tensor")
                if wl.check(call, call.invoke(probe, 5)) is None:
                    first = time.time()
        except grpc.RpcError as e:
            if len(probe_errors) < 10:
                probe_errors.append(f"{time.time() - t_kill:.2f} s: {e.code().name}")
        time.sleep(0.02)
    sweep = correctness_sweep(apis, plans, probe, per_model=1)
    t_all = time.time()
    probe.close()
    time.sleep(1)
    traffic.stop()
    for s in stubs_list:
        s.close()
    totals = stats.totals()
    resumed = next((t for t, o in stats.timeline if t > t_listen and o == "OK"), None)
    settle = (ready or t_listen) + 1.0
    late_errors = sum(1 for t, o in stats.timeline if t > settle and o not in ("OK",))

    def rel(t):
        return None if t is None else round(t - t_kill, 2)
    same_ports = (server.grpc_port, server.metrics_port) == (grpc_port, metrics_port)
    out = {"old_pid": old_pid, "new_pid": server.pid, "same_ports": same_ports,
           "calls_in_flight_at_kill": in_flight,
           "spawn_attempts": attempts, "process_gone_s": rel(t_dead),
           "listening_s": rel(t_listen), "health_serving_s": rel(health),
           "server_ready_s": rel(ready), "first_correct_answer_s": rel(first),
           "all_models_correct_s": rel(t_all), "traffic_resumed_s": rel(resumed),
           "traffic": totals, "errors_after_ready": late_errors,
           "probe_errors": probe_errors,
           "examples": stats.examples[:4]}
    run.summary.setdefault("restart", []).append(out)
    phase = f"restart {cycle + 1}"
    # During the outage calls fail with UNAVAILABLE (no server); nothing else is allowed.
    run.check_counts(phase, totals, allowed_codes=("UNAVAILABLE",))
    if None in (health, ready, first):
        run.violate(phase, "server never became healthy / ready / correct after restart")
    elif first - t_kill > a.restart_bound_s:
        run.violate(phase, f"first correct answer {first - t_kill:.1f} s after the kill > "
                           f"{a.restart_bound_s}")
    if sweep:
        run.violate(phase, f"wrong after restart: {sweep[:3]}")
    if late_errors:
        run.violate(phase, f"{late_errors} errors more than 1 s after ServerReady")
    if resumed is None:
        run.violate(phase, "traffic on the old channels never got an answer again")
    log(f"restart: listening {rel(t_listen)} s, health {rel(health)} s, ready {rel(ready)} s, "
        f"first answer {rel(first)} s, all models {rel(t_all)} s after SIGKILL; "
        f"errors {totals['errors']}")


def phase_explain_storm(run, apis, plans, server, sampler):
    a = run.args
    stubs_list = [srv.Stubs(apis, server.address) for _ in range(4)]
    rss0 = server.rss_mib()
    t0 = time.time()
    traffic = tr.TrafficGroup(apis, plans, stubs_list, 32, timeout=60, seed=a.seed + 2000,
                              explain_fraction=0.75).start()
    time.sleep(a.explain_s)
    stats = traffic.stop()
    t1 = time.time()
    for s in stubs_list:
        s.close()
    totals = stats.totals()
    explains = sum(r["sent"] for k, r in stats.rows.items() if k[2] == "explain")
    window = sampler.window(t0, t1)
    drained, left = await_drained(server, a.drain_bound_s)
    out = {"seconds": round(t1 - t0, 1), "concurrency": 32, "explain_calls": explains,
           **totals, "rss_before_mib": round(rss0, 1),
           "rss_peak_mib": round(max(window), 1) if window else None,
           "rss_after_mib": round(server.rss_mib(), 1), "drained_s": drained,
           "latency_ms": stats.latency_ms(), "examples": stats.examples}
    run.summary["explain_storm"] = out
    run.check_counts("explain storm", totals)
    if drained is None:
        run.violate("explain storm", f"queues never drained: {left}")
    log(f"explain storm: {totals['sent']} calls ({explains} explain), ok {totals['ok']}, "
        f"wrong {totals['wrong']}, errors {totals['errors']}")


def phase_cancel_storm(run, apis, plans, server):
    """Calls with deadlines of 1-50 ms and calls the client cancels 0-30 ms after sending,
    at most `outstanding` at once. Expected outcomes: OK (checked), DEADLINE_EXCEEDED,
    CANCELLED; nothing else."""
    a = run.args
    rng = np.random.default_rng(a.seed + 3000)
    stubs_list = [srv.Stubs(apis, server.address) for _ in range(4)]
    names = sorted(plans)
    stats = tr.Stats()
    outstanding = 64
    lock = threading.Lock()
    live = set()
    cancels = []
    kinds = {"deadline": 0, "cancel": 0, "explain_deadline": 0}
    by_code_before = {c: sum(requests_by_code(server, c).values())
                      for c in ("CANCELLED", "DEADLINE_EXCEEDED")}

    def finished(call, key, fut):
        if fut.cancelled():
            outcome, detail = "CANCELLED", None
        else:
            err = fut.exception()
            if err is not None:
                outcome, detail = (err.code().name if err.code() else "UNKNOWN"), err.details()
            else:
                problem = wl.check(call, fut.result())
                outcome, detail = ("WRONG", problem) if problem else ("OK", None)
        stats.done(key, outcome, detail=detail)
        with lock:
            live.discard(fut)

    t0 = time.time()
    n = 0
    while time.time() - t0 < a.cancel_s:
        now = time.time()
        while cancels and cancels[0][0] <= now:
            heapq.heappop(cancels)[2].cancel()
        with lock:
            busy = len(live)
        if busy >= outstanding:
            time.sleep(0.001)
            continue
        plan = plans[names[int(rng.integers(len(names)))]]
        r = rng.random()
        if r < 0.4:
            kind, timeout = "deadline", float(rng.choice([0.001, 0.002, 0.005, 0.01, 0.02, 0.05]))
            call = wl.random_call(apis, plan, rng)
        elif r < 0.8:
            kind, timeout = "cancel", 30.0
            call = wl.random_call(apis, plan, rng)
        else:
            kind, timeout = "explain_deadline", float(rng.choice([0.002, 0.01, 0.05]))
            call = wl.v1_explain(apis, plan, int(rng.integers(len(plan.inputs))), rng)
        kinds[kind] += 1
        key = (plan.name, call.api, call.kind)
        stats.sent(key)
        fut = call.invoke(stubs_list[n % len(stubs_list)], timeout, future=True)
        with lock:
            live.add(fut)
        fut.add_done_callback(lambda f, c=call, k=key: finished(c, k, f))
        if kind == "cancel":
            heapq.heappush(cancels, (time.time() + float(rng.uniform(0, 0.03)), n, fut))
        n += 1
    for _, _, fut in cancels:
        fut.cancel()
    deadline = time.time() + 60
    while time.time() < deadline:
        with lock:
            if not live:
                break
        time.sleep(0.05)
    with lock:
        lost = len(live)
    t1 = time.time()
    drained, left = await_drained(server, a.drain_bound_s)
    sweep = correctness_sweep(apis, plans, stubs_list[0])
    for s in stubs_list:
        s.close()
    totals = stats.totals()
    totals["lost"] += lost
    by_code_after = {c: sum(requests_by_code(server, c).values())
                     for c in ("CANCELLED", "DEADLINE_EXCEEDED")}
    out = {"seconds": round(t1 - t0, 1), "max_outstanding": outstanding, "kinds": kinds,
           **totals, "drained_s": drained, "pending_after": left,
           "server_counted": {c: by_code_after[c] - by_code_before[c] for c in by_code_after},
           "rss_after_mib": round(server.rss_mib(), 1), "sweep_problems": sweep,
           "examples": [e for e in stats.examples if e["outcome"] not in
                        ("CANCELLED", "DEADLINE_EXCEEDED")]}
    run.summary["cancel_storm"] = out
    run.check_counts("cancel storm", totals, allowed_codes=("CANCELLED", "DEADLINE_EXCEEDED"))
    if drained is None:
        run.violate("cancel storm", f"queues did not drain in {a.drain_bound_s} s: {left}")
    if sweep:
        run.violate("cancel storm", f"wrong or failed after the storm: {sweep[:3]}")
    log(f"cancel storm: {totals['sent']} calls {kinds}; ok {totals['ok']} wrong "
        f"{totals['wrong']} errors {totals['errors']}; drained in {drained} s")


def wait_index(apis, stubs, predicate, timeout=30):
    """Polls KServe RepositoryIndex until predicate({(name, version): (state, reason)});
    returns (seconds, index) or (None, index)."""
    t0 = time.time()
    index = {}
    while time.time() - t0 < timeout:
        try:
            index = {(m.name, m.version): (m.state, m.reason) for m in stubs.kv.RepositoryIndex(
                apis.kv.RepositoryIndexRequest(), timeout=5).models}
            if predicate(index):
                return round(time.time() - t0, 2), index
        except grpc.RpcError:
            pass
        time.sleep(0.1)
    return None, index


def phase_poll_faults(run, apis, plans, workdir):
    a = run.args
    name = "dgvit_fmnist" if "dgvit_fmnist" in plans else next(
        p.name for p in plans.values() if p.family == "classifier")
    plan = plans[name]
    source = pathlib.Path(a.repository) / name / plan.version / "model.pt"
    good = source.read_bytes()
    repo = workdir / "poll_repo"
    mdir = repo / name
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.pt").write_bytes(good)
    flags = [f for f in a.server_flags if not f.startswith(("--model_control=",
                                                            "--repository_poll_seconds="))]
    server = srv.Server(workdir, repo, flags + ["--model_control=poll",
                                                "--repository_poll_seconds=1"],
                        name="poll_server").start()
    log(f"poll faults on a copy of {name} (pid {server.pid})")
    stubs = srv.Stubs(apis, server.address)
    stats = tr.Stats()
    stubs_list = [srv.Stubs(apis, server.address) for _ in range(2)]

    def choose(rng):
        pinned = "1" if rng.random() < 0.3 else ""
        i = int(rng.integers(len(plan.inputs)))
        if rng.random() < 0.5:
            return wl.v1_predict(apis, plan, i, "png" if rng.random() < 0.5 else "tensor",
                                 version=pinned)
        idx = [int(x) for x in rng.integers(len(plan.inputs), size=int(rng.integers(1, 4)))]
        return wl.kserve_infer(apis, plan, idx, "uint8", version=pinned)

    traffic = tr.Traffic(stubs_list, choose, 6, timeout=30, seed=a.seed + 4000,
                         stats=stats).start()
    steps = []
    rng = np.random.default_rng(a.seed + 4001)

    def health():
        try:
            status = stubs.health.Check(apis.health.HealthCheckRequest(service=""),
                                        timeout=2).status
            return apis.health.HealthCheckResponse.ServingStatus.Name(status)
        except grpc.RpcError as e:
            return e.code().name

    def step(label, action, predicate, then=None):
        before = stats.totals()
        action()
        detected, index = wait_index(apis, stubs, predicate)
        extra = then() if then else {}
        time.sleep(1.5)  # traffic over at least one more poll
        after = stats.totals()
        rec = {"step": label, "detected_s": detected,
               "index": {f"{n}/{v}": s[0] + (f" ({s[1][:200]})" if s[1] else "")
                         for (n, v), s in sorted(index.items())},
               "overall_health": health(), "server_alive": server.alive(),
               "sent": after["sent"] - before["sent"], "ok": after["ok"] - before["ok"],
               "errors": after["errors_total"] - before["errors_total"], **extra}
        steps.append(rec)
        log(f"poll: {label}: detected in {detected} s; sent {rec['sent']} errors "
            f"{rec['errors']}")
        if detected is None:
            run.violate("poll faults", f"{label}: the repository index never showed it")
        if not server.alive():
            run.violate("poll faults", f"{label}: server died (exit {server.proc.returncode})")
        if rec["overall_health"] != "SERVING":  # version 1 serves throughout
            run.violate("poll faults", f"{label}: overall health {rec['overall_health']}")

    def state(index, v):
        return index.get((name, v), ("absent", ""))[0]

    def write(v, data):
        (mdir / v).mkdir(exist_ok=True)
        (mdir / v / "model.pt").write_bytes(data)

    def served_by(version, timeout=15):
        t0 = time.time()
        tag = f"default:{version}"
        start = stats.versions[tag]
        while time.time() - t0 < timeout:
            if stats.versions[tag] > start:
                return {"default_answers_from": version,
                        "switched_s": round(time.time() - t0, 2)}
            time.sleep(0.05)
        run.violate("poll faults", f"default-version answers never came from version {version}")
        return {"default_answers_from": None}

    try:
        for cycle in range(a.poll_cycles):
            step(f"{cycle}: corrupt version 2 (random bytes)",
                 lambda: write("2", rng.bytes(256 * 1024)),
                 lambda ix: state(ix, "2") not in ("absent", "READY", "LOADING"))
            step(f"{cycle}: empty version 3, truncated version 4",
                 lambda: (write("3", b""), write("4", good[:len(good) // 2])),
                 lambda ix: all(state(ix, v) not in ("absent", "READY", "LOADING")
                                for v in ("3", "4")))
            step(f"{cycle}: version 4 completed",
                 lambda: write("4", good),
                 lambda ix: state(ix, "4") == "READY", then=lambda: served_by("4"))
            step(f"{cycle}: version 4 removed",
                 lambda: shutil.rmtree(mdir / "4"),
                 lambda ix: state(ix, "4") == "absent" and state(ix, "1") == "READY",
                 then=lambda: served_by("1"))
            step(f"{cycle}: versions 2 and 3 removed",
                 lambda: (shutil.rmtree(mdir / "2"), shutil.rmtree(mdir / "3")),
                 lambda ix: {v for (n, v) in ix if n == name} == {"1"}
                 and state(ix, "1") == "READY")
    finally:
        traffic.stop()
        for s in stubs_list:
            s.close()
    totals = stats.totals()
    sweep = correctness_sweep(apis, {name: plan}, stubs) if server.alive() else ["server dead"]
    stubs.close()
    rss = server.rss_mib()
    code = server.stop()
    max_errors = int(a.poll_error_fraction * totals["sent"])
    out = {"model": name, "poll_seconds": 1, "cycles": a.poll_cycles, **totals,
           "max_errors": max_errors, "answers_by_version": dict(stats.versions),
           "steps": steps, "rss_end_mib": round(rss or 0, 1), "exit_code": code,
           "examples": stats.examples}
    run.summary["poll_faults"] = out
    run.check_counts("poll faults", totals, allowed_codes=("UNAVAILABLE", "NOT_FOUND"),
                     max_errors=max_errors)
    if sweep:
        run.violate("poll faults", f"after the faults: {sweep[:3]}")
    if code != 0:
        run.violate("poll faults", f"server exit status {code} on SIGINT")
    log(f"poll faults: sent {totals['sent']} ok {totals['ok']} wrong {totals['wrong']} "
        f"errors {totals['errors']}; exit {code}")


# ---------------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=sorted(MODES), default="short")
    p.add_argument("--duration", type=float, help="saturation seconds (mode's default)")
    p.add_argument("--warmup", type=float,
                   help="longest warm-up (s of saturation) before RSS growth is bounded")
    p.add_argument("--checkpoint-s", type=float, dest="checkpoint_s",
                   help="seconds of saturation between idle-RSS checkpoints")
    p.add_argument("--settle-mib", type=float, default=16.0, dest="settle_mib",
                   help="the warm-up ends at the first checkpoint whose idle RSS rose less "
                        "than this since the previous one")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--explain-s", type=float, dest="explain_s")
    p.add_argument("--cancel-s", type=float, dest="cancel_s")
    p.add_argument("--restarts", type=int)
    p.add_argument("--poll-cycles", type=int, dest="poll_cycles")
    p.add_argument("--repository", default=str(srv.REPO / "model_repository"))
    p.add_argument("--server-flags", choices=("deploy", "plain"), default="deploy",
                   dest="flag_set",
                   help="deploy: the flags of deploy/kubernetes/base/deployment.yaml (what "
                        "production runs; the default); plain: only --torch_threads=1")
    p.add_argument("--server-arg", action="append", default=[], dest="server_args",
                   help="an extra server flag (repeatable), e.g. --server-arg=--instances=1")
    p.add_argument("--rss-peak-mib", type=float, dest="rss_peak_mib",
                   help="bound on the server's peak RSS (VmHWM) over the whole run "
                        "(default: the Deployment's memory limit)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-python-reference", action="store_false", dest="python_reference",
                   help="skip checking the served references against the Python models")
    p.add_argument("--skip", default="", help="comma-separated phases to skip: restart, "
                                              "explain, cancel, poll")
    p.add_argument("--rss-growth-mib", type=float, dest="rss_growth_mib",
                   help="bound on the idle-RSS ceiling's growth after warm-up (short: 128, "
                        "long: 64)")
    p.add_argument("--restart-bound-s", type=float, default=30.0, dest="restart_bound_s")
    p.add_argument("--drain-bound-s", type=float, default=30.0, dest="drain_bound_s")
    p.add_argument("--poll-error-fraction", type=float, default=0.01,
                   dest="poll_error_fraction")
    p.add_argument("--min-ok", type=int, default=1, dest="min_ok",
                   help="correct answers required per model and API in the saturation")
    p.add_argument("--json-out", help="also write the summary here")
    p.add_argument("--workdir", help="server logs and copies (default: a temporary "
                                     "directory, removed when every bound held)")
    a = p.parse_args(argv)
    for k, v in MODES[a.mode].items():
        if getattr(a, k, None) is None:
            setattr(a, k, v)
    deploy_flags, limit_mib = srv.deployment_flags()
    a.server_flags = (deploy_flags if a.flag_set == "deploy" else ["--torch_threads=1"]) \
        + a.server_args
    if a.rss_peak_mib is None:
        a.rss_peak_mib = limit_mib
    return a


def main(argv=None):
    a = parse_args(argv)
    from gatescope import paths
    if paths.CHECKOUT != srv.REPO:
        print(f"gatescope is imported from {paths.PACKAGE_DIR}, not from this checkout "
              f"({srv.REPO}): run scripts/install_python.sh", file=sys.stderr)
        return 2
    if not srv.SERVER_BIN.exists():
        print(f"{srv.SERVER_BIN} is missing: build first (scripts/build.sh)", file=sys.stderr)
        return 2
    skip = set(filter(None, a.skip.split(",")))
    workdir = pathlib.Path(a.workdir or tempfile.mkdtemp(prefix="gatescope-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run = Run(a)
    t_start = time.time()
    apis = srv.Apis(workdir / "stubs")
    server = srv.Server(workdir, a.repository, a.server_flags)
    sampler = None
    status = 0
    try:
        t0 = time.time()
        server.start()
        run.summary["startup_s"] = round(time.time() - t0, 2)
        log(f"server pid {server.pid} on {server.address} started in "
            f"{run.summary['startup_s']} s: {' '.join(server.command[1:])}")
        sampler = srv.RssSampler(server, 0.5)
        stubs = srv.Stubs(apis, server.address)
        plans = phase_setup(run, apis, server, stubs)
        stubs.close()
        phase_saturation(run, apis, plans, server, sampler)
        if "restart" not in skip:
            for c in range(a.restarts):
                phase_restart(run, apis, plans, server, c)
        if "explain" not in skip:
            phase_explain_storm(run, apis, plans, server, sampler)
        if "cancel" not in skip:
            phase_cancel_storm(run, apis, plans, server)
        rss = server.rss_mib()
        hwm = round((server.status_kib("VmHWM") or 0) / 1024, 1)
        code = server.stop()
        run.summary["shutdown"] = {"exit_code": code, "rss_before_stop_mib": round(rss, 1),
                                   "vm_hwm_since_restart_mib": hwm}
        if code != 0:
            run.violate("shutdown", f"exit status {code} on SIGINT")
        if hwm > a.rss_peak_mib:
            run.violate("shutdown", f"peak RSS since the restart {hwm} MiB > "
                                    f"{a.rss_peak_mib:.0f}")
        if "poll" not in skip:
            phase_poll_faults(run, apis, plans, workdir)
    except wl.Unsupported as e:
        print(f"soak: {e}", file=sys.stderr)
        status = 2
    except Exception as e:  # a crash of the soak itself is a failed run, with its trace
        traceback.print_exc()
        run.violate("soak", f"{type(e).__name__}: {e}")
    finally:
        if sampler:
            sampler.stop()
        if server.alive():
            server.stop()
    run.summary["wall_s"] = round(time.time() - t_start, 1)
    run.summary["violations"] = run.violations
    run.summary["passed"] = not run.violations and status == 0
    run.summary["workdir"] = str(workdir)
    text = json.dumps(run.summary, indent=1, default=str)
    print(text)
    if a.json_out:
        pathlib.Path(a.json_out).write_text(text)
    if run.summary["passed"] and not a.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not run.summary["passed"]:
        log(f"server logs kept in {workdir}")
    return status or (1 if run.violations else 0)


if __name__ == "__main__":
    sys.exit(main())
