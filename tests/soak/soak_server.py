"""The soak's view of the real server: starting it (on given or free ports), SIGKILL and
graceful stop, its resident memory from /proc, its /metrics, and the Python stubs of both
APIs and of grpc.health.v1 generated with Debian's protoc."""
import importlib
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / "build"
SERVER_BIN = BUILD / "server" / "gatescope-server"
OPS_LIB = BUILD / "models" / "ops" / "libgatescope_ops.so"
GRPC_PLUGIN = "/usr/bin/grpc_python_plugin"


class Apis:
    """The generated modules: kv / kv_grpc (KServe v2), v1 / v1_grpc (gatescope.v1),
    health / health_grpc (grpc.health.v1)."""

    def __init__(self, out_dir):
        out = pathlib.Path(out_dir)
        (out / "api").mkdir(parents=True, exist_ok=True)
        (out / "health").mkdir(parents=True, exist_ok=True)

        def protoc(proto_path, dest, *protos):
            subprocess.run(["protoc", f"--proto_path={proto_path}", f"--python_out={dest}",
                            f"--grpc_python_out={dest}",
                            f"--plugin=protoc-gen-grpc_python={GRPC_PLUGIN}", *protos],
                           check=True)

        protoc(REPO / "proto", out / "api", "inference/model_config.proto",
               "inference/grpc_service.proto", "gatescope/v1/model_config.proto",
               "gatescope/v1/inference.proto")
        # grpc.health.v1 is generated flat (health_pb2): a generated top-level `grpc`
        # directory would shadow the grpc runtime.
        protoc(REPO / "proto" / "grpc" / "health" / "v1", out / "health", "health.proto")
        sys.path.insert(0, str(out / "api"))
        sys.path.insert(0, str(out / "health"))
        import gatescope
        gatescope.__path__.append(str(out / "api" / "gatescope"))
        self.kv = importlib.import_module("inference.grpc_service_pb2")
        self.kv_grpc = importlib.import_module("inference.grpc_service_pb2_grpc")
        self.v1 = importlib.import_module("gatescope.v1.inference_pb2")
        self.v1_grpc = importlib.import_module("gatescope.v1.inference_pb2_grpc")
        self.health = importlib.import_module("health_pb2")
        self.health_grpc = importlib.import_module("health_pb2_grpc")


DEPLOYMENT = REPO / "deploy" / "kubernetes" / "base" / "deployment.yaml"
# Set by the soak itself (repository, ops library, ports, port file).
OWN_FLAGS = ("--model_repository", "--ops_library", "--grpc_port", "--metrics_port", "--http_port",
             "--port_file", "--host")


def deployment_flags(path=DEPLOYMENT):
    """The server flags of the Kubernetes base Deployment (what production runs), less
    the ones the soak sets itself, and the container's memory limit in MiB."""
    import yaml
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "Deployment":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            flags = [f for f in container["args"] if not f.split("=", 1)[0] in OWN_FLAGS]
            limit = container["resources"]["limits"]["memory"]
            units = {"Gi": 1024, "Mi": 1, "G": 1e9 / 2**20, "M": 1e6 / 2**20}
            for suffix, mib in units.items():
                if limit.endswith(suffix):
                    return flags, float(limit[:-len(suffix)]) * mib
            return flags, float(limit) / 2**20
    raise ValueError(f"no Deployment in {path}")


CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
    # A demanding client reconnects quickly after a server restart (gRPC's defaults back
    # off from 1 s up to 120 s).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
    # Each channel its own connection: with gRPC's global subchannel pool, a new channel
    # (the restart probe) would share the old channels' connection and its backoff
    # (measured: 2.4 s of UNAVAILABLE after the restarted server listened).
    ("grpc.use_local_subchannel_pool", 1),
]


class Stubs:
    """One channel and the three stubs on it."""

    def __init__(self, apis, address):
        import grpc
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.v1 = apis.v1_grpc.InferenceStub(self.channel)
        self.kv = apis.kv_grpc.GRPCInferenceServiceStub(self.channel)
        self.health = apis.health_grpc.HealthStub(self.channel)

    def close(self):
        self.channel.close()


class Server:
    """gatescope-server on `repository`; `start()` waits for its port file (written once it
    serves, after every model loaded)."""

    def __init__(self, workdir, repository, flags=(), name="server"):
        self.workdir = pathlib.Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.repository = pathlib.Path(repository)
        self.flags = list(flags)
        self.name = name
        self.proc = None
        self.grpc_port = 0
        self.metrics_port = 0
        self.starts = 0

    @property
    def address(self):
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def pid(self):
        return self.proc.pid

    @property
    def log_path(self):
        return self.workdir / f"{self.name}.{self.starts}.log"

    def spawn(self, grpc_port=0, metrics_port=0):
        """Starts the process; returns at once (see wait_listening)."""
        self.starts += 1
        self.port_file = self.workdir / f"{self.name}.{self.starts}.ports"
        self.port_file.unlink(missing_ok=True)
        cmd = [str(SERVER_BIN), *self.flags, f"--model_repository={self.repository}",
               f"--ops_library={OPS_LIB}", f"--grpc_port={grpc_port}",
               f"--metrics_port={metrics_port}", "--http_port=0", f"--port_file={self.port_file}"]
        self.command = cmd
        self._log = open(self.log_path, "w")
        threads = next((f.split("=", 1)[1] for f in self.flags
                        if f.startswith("--torch_threads=")), "1")
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def wait_listening(self, timeout=180):
        """Waits for the port file; returns False if the process exited first."""
        deadline = time.time() + timeout
        while not self.port_file.exists():
            if self.proc.poll() is not None:
                return False
            if time.time() > deadline:
                raise RuntimeError(f"{self.name} did not start in {timeout} s: {self.log_path}")
            time.sleep(0.02)
        fields = dict(kv.split("=") for kv in self.port_file.read_text().split())
        self.grpc_port, self.metrics_port = int(fields["grpc"]), int(fields["metrics"])
        return True

    def start(self, grpc_port=0, metrics_port=0, timeout=180):
        self.spawn(grpc_port, metrics_port)
        if not self.wait_listening(timeout):
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: "
                               f"{self.log_path.read_text()[-2000:]}")
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()

    def stop(self, timeout=60):
        """SIGINT (graceful drain); returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._log.close()
                return "timeout"
        self._log.close()
        return self.proc.returncode

    def status_kib(self, field):
        try:
            for line in open(f"/proc/{self.proc.pid}/status"):
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            return None
        return None

    def rss_mib(self):
        kib = self.status_kib("VmRSS")
        return None if kib is None else kib / 1024.0

    def metrics_text(self, timeout=10):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=timeout).read().decode()

    def metrics(self):
        """{(name, ((label, value), ...)): value} of every sample line."""
        out = {}
        for line in self.metrics_text().splitlines():
            if not line or line.startswith("#"):
                continue
            series, value = line.rsplit(" ", 1)
            if "{" in series:
                name, rest = series.split("{", 1)
                labels = tuple(sorted(tuple(kv.split("=", 1)) for kv in
                                      _split_labels(rest.rstrip("}"))))
                labels = tuple((k, v.strip('"')) for k, v in labels)
            else:
                name, labels = series, ()
            out[(name, labels)] = float(value)
        return out


def _split_labels(text):
    parts, cur, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


def per_model(metrics, name, **fixed):
    """{model: value} of the series `name` whose other labels equal `fixed`."""
    out = {}
    for (n, labels), value in metrics.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == v for k, v in fixed.items()) and "model" in d:
            out[d["model"]] = out.get(d["model"], 0.0) + value
    return out


class RssSampler:
    """Samples VmRSS of whichever process `server` runs now, every `period` s, as
    (time, MiB); stop() ends it. Samples are taken across restarts (the pid is re-read)."""

    def __init__(self, server, period=0.5):
        self.server = server
        self.period = period
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            if self.server.alive():
                rss = self.server.rss_mib()
                if rss is not None:
                    self.samples.append((time.time(), rss))
            self._stop.wait(self.period)

    def window(self, start, end):
        return [r for t, r in self.samples if start <= t <= end]

    def stop(self):
        self._stop.set()
        self._thread.join()


def rss_report(samples_tr, warmup_end):
    """Start, peak and end of the live RSS [(t, MiB)]; after `warmup_end`, the slope of a
    least-squares line through the samples (MiB per minute); the curve."""
    if not samples_tr:
        return {"error": "no samples"}
    rss = [r for _, r in samples_tr]
    rep = {"start_mib": round(rss[0], 1), "peak_mib": round(max(rss), 1),
           "end_mib": round(rss[-1], 1), "samples": len(rss)}
    after = [(t, r) for t, r in samples_tr if t >= warmup_end]
    if len(after) >= 10:
        ts = [t for t, _ in after]
        rs = [r for _, r in after]
        tm, rm = statistics.fmean(ts), statistics.fmean(rs)
        var = sum((t - tm) ** 2 for t in ts)
        slope = sum((t - tm) * (r - rm) for t, r in after) / var if var else 0.0
        rep["live_slope_after_warmup_mib_per_min"] = round(slope * 60, 2)
    # The curve, about ten points: [seconds from the start, MiB].
    t0 = samples_tr[0][0]
    step = max(1, len(samples_tr) // 10)
    rep["curve"] = [[round(t - t0), round(r)] for t, r in samples_tr[::step]]
    return rep
