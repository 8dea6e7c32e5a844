"""Runs the real gatescope-server (built in ./build) on free ports, and its client."""
import contextlib
import importlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
# The build whose server and client the tests run: ./build, or another one (e.g. build-asan,
# the server under AddressSanitizer + UBSan: scripts/asan_integration.sh).
BUILD = pathlib.Path(os.environ.get("GATESCOPE_BUILD_DIR", REPO / "build"))


class RunningServer:
    def __init__(self, proc, grpc_port, metrics_port, log_path, http_port=-1):
        self.proc = proc
        self.address = f"127.0.0.1:{grpc_port}"
        self.metrics_port = metrics_port
        self.http_port = http_port  # KServe v2 REST
        self.log_path = log_path

    def client(self, *args, check=False):
        """Runs gatescope-client against this server; returns CompletedProcess."""
        cmd = [str(BUILD / "client" / "gatescope-client"), args[0], "--server", self.address,
               *args[1:]]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=check)

    def log(self):
        return pathlib.Path(self.log_path).read_text()


def generate_python_stubs(out_dir, *protos):
    """Generates Python message and gRPC modules for `protos` (paths under proto/) into
    out_dir with Debian's protoc and grpc_python_plugin."""
    subprocess.run(["protoc", f"--proto_path={REPO / 'proto'}", f"--python_out={out_dir}",
                    f"--grpc_python_out={out_dir}",
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin", *protos],
                   check=True)


def import_api_modules(out_dir):
    """Generates the Python modules of both APIs into out_dir and imports them: returns
    (KServe messages, KServe grpc, gatescope.v1 messages, gatescope.v1 grpc). The generated
    gatescope.v1 package is grafted onto the models' `gatescope` package."""
    generate_python_stubs(out_dir, "inference/model_config.proto", "inference/grpc_service.proto",
                          "gatescope/v1/model_config.proto", "gatescope/v1/inference.proto")
    sys.path.insert(0, str(out_dir))
    import gatescope
    gatescope.__path__.append(str(pathlib.Path(out_dir) / "gatescope"))
    return tuple(importlib.import_module(m) for m in (
        "inference.grpc_service_pb2", "inference.grpc_service_pb2_grpc",
        "gatescope.v1.inference_pb2", "gatescope.v1.inference_pb2_grpc"))


@contextlib.contextmanager
def unix_socket_path():
    """A path for --grpc_unix_socket in a new directory under /tmp, short whatever the
    test's temporary directory (a socket path holds at most 107 bytes); removed after."""
    directory = tempfile.mkdtemp(prefix="gs_sock_", dir="/tmp")
    try:
        yield pathlib.Path(directory) / "grpc.sock"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def start_server(tmp_path, repo_dir, extra=(), env=None, wrap=()):
    """Starts the server (behind the command prefix `wrap`, e.g. taskset) and waits until it
    serves."""
    port_file = tmp_path / "ports"
    log_path = tmp_path / "server.log"
    cmd = [*wrap, str(BUILD / "server" / "gatescope-server"), f"--model_repository={repo_dir}",
           f"--ops_library={BUILD / 'models' / 'ops' / 'libgatescope_ops.so'}",
           "--grpc_port=0", "--metrics_port=0", "--http_port=0", f"--port_file={port_file}",
           "--torch_threads=2", *extra]
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env=None if env is None else {**os.environ, **env})
    deadline = time.time() + 120
    while not port_file.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log_path.read_text()}")
        if time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"server did not start:\n{log_path.read_text()}")
        time.sleep(0.1)
    fields = dict(kv.split("=") for kv in port_file.read_text().split())
    return RunningServer(proc, int(fields["grpc"]), int(fields["metrics"]), log_path,
                         int(fields["http"]))


def serve_shipped(tmp_path_factory, names, extra=()):
    """For module fixtures (`yield from`): the server on a temporary repository holding
    copies of the shipped models `names` (copies: the server refuses symlinks that leave
    its repository); stops it afterwards and checks a clean exit."""
    repo = tmp_path_factory.mktemp("repo")
    for name in names:
        shutil.copytree(REPO / "model_repository" / name, repo / name)
    srv = start_server(tmp_path_factory.mktemp("server"), repo, extra)
    yield srv
    assert stop_server(srv) == 0, srv.log()


def api_stubs(server, tmp_path_factory):
    """For module fixtures (`yield from`): (KServe messages, KServe stub, gatescope.v1
    messages, gatescope.v1 stub) on one channel to `server`, closed afterwards."""
    import grpc
    kv, kv_grpc, v1, v1_grpc = import_api_modules(tmp_path_factory.mktemp("stubs"))
    channel = grpc.insecure_channel(server.address)
    yield kv, kv_grpc.GRPCInferenceServiceStub(channel), v1, v1_grpc.InferenceStub(channel)
    channel.close()


def metric_value(server, name, **labels):
    """The current value of the Prometheus series `name`{labels} of `server`, or None."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                  timeout=10).read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{") and line.split("}")[0][len(name) + 1:] == want:
            return float(line.rsplit(" ", 1)[1])
    return None


def await_metric(server, name, value, timeout=60, **labels):
    """Polls `server`'s /metrics until the series `name`{labels} equals `value` (server
    state, not wall time, decides when a test may go on); fails after `timeout` s."""
    deadline = time.time() + timeout
    while metric_value(server, name, **labels) != value:
        assert time.time() < deadline, f"{name}{labels} never reached {value}"
        time.sleep(0.05)


def stop_server(server):
    server.proc.send_signal(2)  # SIGINT: graceful drain
    try:
        return server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        raise
