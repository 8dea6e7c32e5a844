"""Closed-loop traffic (a fixed number of workers, each sending its next request when the
last one is answered) and the outcome counts of every request."""
import collections
import threading
import time

import grpc
import numpy as np

import soak_workload as wl


class Stats:
    """Outcomes per (model, api, kind): sent, ok, wrong, errors by status code, lost (no
    answer: still in flight when the traffic was stopped and given its grace, or the
    client's own deadline passed). Thread-safe."""

    def __init__(self, track_times=False):
        self.lock = threading.Lock()
        self.rows = collections.defaultdict(lambda: {"sent": 0, "ok": 0, "wrong": 0,
                                                     "lost": 0, "errors": {}})
        self.latencies = []
        self.model_latencies = collections.defaultdict(list)
        self.versions = collections.Counter()
        self.examples = []  # first problems, for the report
        self.track_times = track_times
        self.timeline = []  # (end time, "OK" | "WRONG" | code) when track_times

    def sent(self, key):
        with self.lock:
            self.rows[key]["sent"] += 1

    def done(self, key, outcome, latency=None, detail=None, version=None):
        now = time.time()
        with self.lock:
            row = self.rows[key]
            if outcome == "OK":
                row["ok"] += 1
                if latency is not None:
                    self.latencies.append(latency)
                    self.model_latencies[key[0]].append(latency)
                if version is not None:
                    self.versions[version] += 1
            elif outcome == "WRONG":
                row["wrong"] += 1
            elif outcome == "LOST":
                row["lost"] += 1
            else:
                row["errors"][outcome] = row["errors"].get(outcome, 0) + 1
            if outcome != "OK" and len(self.examples) < 8:
                self.examples.append({"model": key[0], "api": key[1], "kind": key[2],
                                      "outcome": outcome, "detail": (detail or "")[:300]})
            if self.track_times:
                self.timeline.append((now, outcome))

    def lose_in_flight(self, in_flight):
        with self.lock:
            for key, n in in_flight.items():
                self.rows[key]["lost"] += n

    def totals(self):
        t = {"sent": 0, "ok": 0, "wrong": 0, "lost": 0, "errors": {}}
        with self.lock:
            for row in self.rows.values():
                for k in ("sent", "ok", "wrong", "lost"):
                    t[k] += row[k]
                for code, n in row["errors"].items():
                    t["errors"][code] = t["errors"].get(code, 0) + n
        t["errors_total"] = sum(t["errors"].values())
        return t

    def per_model_api(self):
        out = {}
        with self.lock:
            for (model, api, kind), row in sorted(self.rows.items()):
                d = out.setdefault(model, {}).setdefault(api, {"sent": 0, "ok": 0, "wrong": 0,
                                                               "lost": 0, "errors": 0})
                for k in ("sent", "ok", "wrong", "lost"):
                    d[k] += row[k]
                d["errors"] += sum(row["errors"].values())
        return out

    def latency_ms(self, model=None):
        with self.lock:
            lat = np.array(self.model_latencies[model] if model else self.latencies) * 1000
        if not len(lat):
            return {}
        return {"p50": round(float(np.percentile(lat, 50)), 1),
                "p90": round(float(np.percentile(lat, 90)), 1),
                "p99": round(float(np.percentile(lat, 99)), 1),
                "max": round(float(lat.max()), 1)}


def run_call(call, stubs, timeout, stats):
    """Sends `call`, checks the answer, records the outcome; returns it."""
    key = (call.plan.name, call.api, call.kind)
    stats.sent(key)
    t0 = time.time()
    try:
        resp = call.invoke(stubs, timeout)
    except grpc.RpcError as e:
        code = e.code().name if e.code() else "UNKNOWN"
        elapsed = time.time() - t0
        if code == "DEADLINE_EXCEEDED" and elapsed >= 0.98 * timeout:
            code = "LOST"  # the client gave up: no answer within the call's deadline
        stats.done(key, code, detail=e.details())
        return code
    latency = time.time() - t0
    problem = wl.check(call, resp)
    if problem:
        stats.done(key, "WRONG", detail=f"{call.kind} {call.variant}: {problem}")
        return "WRONG"
    pinned = "pinned" if call.request.model_version else "default"
    stats.done(key, "OK", latency, version=f"{pinned}:{resp.model_version}")
    return "OK"


class Traffic:
    """`concurrency` workers over `stubs_list` (round robin), each looping
    `choose(rng) -> Call` until stop()."""

    def __init__(self, stubs_list, choose, concurrency, timeout, seed, stats=None):
        self.stubs_list = stubs_list
        self.choose = choose
        self.timeout = timeout
        self.stats = stats or Stats()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.in_flight = collections.Counter()
        self.threads = [threading.Thread(target=self._work, args=(w, seed + w), daemon=True)
                        for w in range(concurrency)]
        self.started = None
        self.unavailable_backoff = 0.05
        self._running = threading.Event()
        self._running.set()

    def start(self):
        self.started = time.time()
        for t in self.threads:
            t.start()
        return self

    def pause(self, timeout=120):
        """Holds every worker before its next request and waits until none is in flight;
        returns the seconds that took (None if calls were still in flight at timeout)."""
        self._running.clear()
        t0 = time.time()
        while time.time() - t0 < timeout:
            with self._lock:
                busy = sum(self.in_flight.values())
            if not busy:
                return round(time.time() - t0, 2)
            time.sleep(0.02)
        return None

    def resume(self):
        self._running.set()

    def _work(self, w, seed):
        rng = np.random.default_rng(seed)
        stubs = self.stubs_list[w % len(self.stubs_list)]
        while not self._stop.is_set():
            if not self._running.is_set():
                self._running.wait(0.1)
                continue
            call = self.choose(rng)
            key = (call.plan.name, call.api, call.kind)
            with self._lock:
                self.in_flight[key] += 1
            try:
                outcome = run_call(call, stubs, self.timeout, self.stats)
            finally:
                with self._lock:
                    self.in_flight[key] -= 1
            if outcome == "UNAVAILABLE":
                # No server (or draining): back off as a sane client does, instead of
                # spinning on instant failures and starving a restarting server.
                self._stop.wait(self.unavailable_backoff)

    def stop(self, grace=None):
        """Stops sending; waits up to timeout + grace for the calls in flight; counts those
        still unanswered as lost. Returns the stats."""
        self._stop.set()
        self._running.set()
        deadline = time.time() + self.timeout + (10 if grace is None else grace)
        for t in self.threads:
            t.join(max(0.0, deadline - time.time()))
        with self._lock:
            stuck = {k: n for k, n in self.in_flight.items() if n}
        self.stats.lose_in_flight(stuck)
        return self.stats


def family_chooser(apis, plans, family, explain_fraction=0.0, api=None):
    """A chooser picking one model of `family` at random, then a random request on a random
    API (or `api`); a fraction of them explanations."""
    chosen = [p for _, p in sorted(plans.items()) if p.family == family]

    def choose(rng):
        plan = chosen[int(rng.integers(len(chosen)))]
        explain = explain_fraction > 0 and rng.random() < explain_fraction
        return wl.random_call(apis, plan, rng, api=api, explain=explain)
    return choose


class TrafficGroup:
    """Closed-loop traffic over every family of `plans`, the concurrency split by
    soak_workload.CONCURRENCY_SHARE (at least one worker per family): in one closed loop
    over all models, the slowest model's queue would end up holding nearly every worker
    (measured: 20 of 24 waiting on the segmenters, 12 s each) and the others would get
    next to no concurrency. One Stats for all."""

    def __init__(self, apis, plans, stubs_list, concurrency, timeout, seed, stats=None,
                 explain_fraction=0.0):
        self.stats = stats or Stats()
        families = sorted({p.family for p in plans.values()})
        share = {f: wl.CONCURRENCY_SHARE[f] for f in families}
        total = sum(share.values())
        self.split = {f: max(1, round(concurrency * share[f] / total)) for f in families}
        self.groups = [Traffic(stubs_list, family_chooser(apis, plans, f, explain_fraction),
                               n, timeout, seed + 100 * k, self.stats)
                       for k, (f, n) in enumerate(sorted(self.split.items()))]

    def start(self):
        for g in self.groups:
            g.start()
        return self

    def pause(self, timeout=120):
        for g in self.groups:
            g._running.clear()
        t0 = time.time()
        for g in self.groups:
            if g.pause(max(0.0, timeout - (time.time() - t0))) is None:
                return None
        return round(time.time() - t0, 2)

    def resume(self):
        for g in self.groups:
            g.resume()

    def stop(self, grace=None):
        for g in self.groups:
            g._stop.set()
            g._running.set()
        for g in self.groups:
            g.stop(grace)
        return self.stats
