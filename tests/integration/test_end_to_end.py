"""The real server and the real client over loopback, checked against the Python model."""
import json
import subprocess
import urllib.request

import numpy as np
import pytest
import torch

from server_harness import BUILD, REPO, start_server, stop_server, unix_socket_path
from gatescope import ops
from gatescope.data import fashion_mnist
from gatescope.data.fashion_mnist import write_pngs

MODELS = ["dgvit_fmnist", "vit_fmnist"]
N_IMAGES = 200
START = 9000  # held-out test images (the test split is never trained on)


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def pngs(tmp_path_factory):
    return write_pngs(tmp_path_factory.mktemp("png"), start=START, count=N_IMAGES)


def python_probabilities(model_name, start, count):
    ops.load()
    module = torch.jit.load(str(REPO / "model_repository" / model_name / "1" / "model.pt"))
    images, _ = fashion_mnist.load_split("t10k")
    x = torch.from_numpy(images[start:start + count].astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - fashion_mnist.MEAN) / fashion_mnist.STD
    with torch.no_grad():
        return torch.softmax(module(x)["logits"], -1)


@pytest.mark.parametrize("model", MODELS)
def test_labels_match_python_model(server, pngs, model):
    res = server.client("predict", "--model", model, "--top-k", "3", *[str(p) for p, _ in pngs])
    assert res.returncode == 0, res.stdout + res.stderr
    lines = json_lines(res.stdout)
    assert len(lines) == N_IMAGES
    probs = python_probabilities(model, START, N_IMAGES)
    correct = 0
    for i, (line, (path, true_label)) in enumerate(zip(lines, pngs)):
        assert line["file"] == str(path)
        expected = int(probs[i].argmax())
        assert line["label"] == fashion_mnist.CLASS_NAMES[expected], (i, line)
        assert abs(line["score"] - float(probs[i, expected])) < 1e-4
        assert len(line["topk"]) == 3
        assert [t["score"] for t in line["topk"]] == sorted([t["score"] for t in line["topk"]],
                                                            reverse=True)
        correct += expected == true_label
    assert correct / N_IMAGES > 0.8  # sanity: the shipped model classifies


def test_bad_inputs_get_clear_codes_and_server_keeps_serving(server, pngs, tmp_path):
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    text = tmp_path / "notes.png"
    text.write_text("this is not an image")
    raw = tmp_path / "pixels.u8"
    raw.write_bytes(bytes(28 * 30))
    good = str(pngs[0][0])

    res = server.client("predict", "--model", "dgvit_fmnist", str(empty), str(text), good)
    lines = json_lines(res.stdout)
    assert res.returncode == 2
    assert lines[0]["error"]["code"] == "INVALID_ARGUMENT"
    assert lines[1]["error"]["code"] == "INVALID_ARGUMENT"
    assert "label" in lines[2]

    res = server.client("predict", "--model", "dgvit_fmnist", "--raw-shape", "1,28,30", str(raw))
    assert json_lines(res.stdout)[0]["error"]["code"] == "INVALID_ARGUMENT"
    assert "does not match the model input" in json_lines(res.stdout)[0]["error"]["message"]

    res = server.client("predict", "--model", "no_such_model", good)
    assert json_lines(res.stdout)[0]["error"]["code"] == "NOT_FOUND"
    res = server.client("predict", "--model", "dgvit_fmnist", "--version", "99", good)
    assert json_lines(res.stdout)[0]["error"]["code"] == "NOT_FOUND"

    res = server.client("predict", "--model", "dgvit_fmnist", good)
    assert res.returncode == 0 and "label" in json_lines(res.stdout)[0]


def test_raw_tensor_input_matches_png(server, pngs, tmp_path):
    images, _ = fashion_mnist.load_split("t10k")
    raw = tmp_path / "img.u8"
    raw.write_bytes(images[START].tobytes())
    f32 = tmp_path / "img.f32"
    f32.write_bytes((images[START].astype("<f4") / 255.0).astype("<f4").tobytes())
    png = server.client("predict", "--model", "dgvit_fmnist", str(pngs[0][0]))
    u8 = server.client("predict", "--model", "dgvit_fmnist", "--raw-shape", "28,28", str(raw))
    fl = server.client("predict", "--model", "dgvit_fmnist", "--raw-shape", "1,28,28",
                       "--raw-dtype", "float32", str(f32))
    a, b, c = (json_lines(r.stdout)[0] for r in (png, u8, fl))
    assert a["label"] == b["label"] == c["label"]
    assert abs(a["score"] - b["score"]) < 1e-6
    assert abs(a["score"] - c["score"]) < 1e-4


def test_health_models_and_metrics(server, pngs):
    overall = server.client("health")
    assert overall.returncode == 0 and json_lines(overall.stdout)[0]["status"] == "SERVING"
    for m in MODELS:
        res = server.client("health", "--service", m)
        assert json_lines(res.stdout)[0]["status"] == "SERVING"
    unknown = server.client("health", "--service", "nope")
    assert json_lines(unknown.stdout)[0]["error"]["code"] == "NOT_FOUND"

    services = {line["service"] for line in json_lines(server.client("services").stdout)}
    assert {"gatescope.v1.Inference", "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection"} <= services

    listed = {m["name"]: m for m in json_lines(server.client("models").stdout)}
    assert set(MODELS) <= set(listed)
    assert all(listed[m]["ready"] and listed[m]["task"] == "image_classification" for m in MODELS)

    server.client("predict", "--model", "vit_fmnist", str(pngs[0][0]), check=True)
    body = urllib.request.urlopen(
        f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    ok_line = [l for l in body.splitlines()
               if l.startswith('gatescope_requests_total{code="OK",kind="predict",model="vit_fmnist"}')]
    assert ok_line and float(ok_line[0].split()[-1]) >= 1
    assert 'gatescope_request_duration_seconds_count{kind="predict",model="dgvit_fmnist"}' in body
    assert 'gatescope_model_ready{model="dgvit_fmnist"} 1' in body
    values = {l.split()[0]: float(l.split()[1]) for l in body.splitlines()
              if l.startswith("gatescope_") and " " in l}
    m = '{model="vit_fmnist"}'
    assert values["gatescope_inferences_total" + m] >= 1
    assert values["gatescope_executions_total" + m] >= 1
    assert values["gatescope_inferences_total" + m] == values["gatescope_batch_size_sum" + m]
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert values[f"gatescope_{stage}_duration_seconds_count" + m] >= 1
    assert values["gatescope_pending_requests" + m] == 0
    assert values["gatescope_queue_capacity" + m] == 256  # --max_queue_size, one level
    assert values["gatescope_process_resident_memory_bytes"] > 50e6


def test_broken_model_is_unavailable_and_others_serve(tmp_path, pngs):
    repo = tmp_path / "repo"
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.pt").write_bytes(b"not torchscript")
    good = repo / "dgvit_fmnist" / "1"
    good.mkdir(parents=True)
    (good / "model.pt").write_bytes(
        (REPO / "model_repository" / "dgvit_fmnist" / "1" / "model.pt").read_bytes())
    srv = start_server(tmp_path, repo)
    try:
        res = srv.client("predict", "--model", "broken", str(pngs[0][0]))
        assert json_lines(res.stdout)[0]["error"]["code"] == "UNAVAILABLE"
        assert json_lines(srv.client("health").stdout)[0]["status"] == "NOT_SERVING"
        assert json_lines(srv.client("health", "--service", "dgvit_fmnist").stdout)[0][
            "status"] == "SERVING"
        res = srv.client("predict", "--model", "dgvit_fmnist", str(pngs[0][0]))
        assert res.returncode == 0
    finally:
        assert stop_server(srv) == 0


@pytest.mark.parametrize("api, code", [(["kserve"], "NOT_FOUND"),
                                       (["kserve", "--streaming"], "UNKNOWN"),
                                       (["rest"], "NOT_FOUND")])
def test_load_generator_counts_failed_requests_by_code(server, pngs, api, code):
    """A model the server lacks: every unary ModelInfer fails NOT_FOUND; over
    ModelStreamInfer each reply carries only an error message (as Triton's), counted as
    UNKNOWN, and the stream goes on; over REST each answer is a 404, counted as the
    NOT_FOUND it stands for. Either way the tool exits 2."""
    address = f"127.0.0.1:{server.http_port}" if api == ["rest"] else server.address
    cmd = [str(BUILD / "client" / "gatescope-perf"), "--server", address,
           "--model", "no_such_model", "--api", *api, "--inputs", "image",
           "--concurrency", "2", "--warmup-ms", "100", "--window-ms", "200", "--max-windows", "3",
           str(pngs[0][0])]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    row = json_lines(out.stdout)[-1]
    assert row["ok"] == 0 and list(row["errors"]) == [code] and row["errors"][code] > 10


def test_the_client_reaches_the_server_over_its_unix_socket_too(tmp_path, pngs):
    """--grpc_unix_socket: the same answers over the socket as over the port, and the
    socket file gone once the server stops."""
    repo = tmp_path / "repo"
    model = repo / "dgvit_fmnist" / "1"
    model.mkdir(parents=True)
    (model / "model.pt").write_bytes(
        (REPO / "model_repository" / "dgvit_fmnist" / "1" / "model.pt").read_bytes())
    files = [str(p) for p, _ in pngs[:4]]
    with unix_socket_path() as socket:
        srv = start_server(tmp_path, repo, extra=[f"--grpc_unix_socket={socket}"])
        try:
            assert socket.is_socket()
            over_tcp = json_lines(srv.client("predict", "--model", "dgvit_fmnist", "--top-k",
                                             "3", *files, check=True).stdout)
            client = str(BUILD / "client" / "gatescope-client")
            res = subprocess.run([client, "predict", "--server", f"unix:{socket}", "--model",
                                  "dgvit_fmnist", "--top-k", "3", *files],
                                 capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr
            assert json_lines(res.stdout) == over_tcp
            assert len(over_tcp) == 4 and all("label" in line for line in over_tcp)
        finally:
            assert stop_server(srv) == 0
        assert not socket.exists()


def test_concurrent_clients_get_their_own_answers(server, pngs):
    """Several client processes at once: requests are batched together, yet every file
    gets exactly the answer it gets alone."""
    import subprocess
    files = [str(p) for p, _ in pngs[:60]]
    alone = {l["file"]: l for l in json_lines(
        server.client("predict", "--model", "dgvit_fmnist", *files).stdout)}
    client = str(BUILD / "client" / "gatescope-client")
    procs = [subprocess.Popen([client, "predict", "--server", server.address, "--model",
                               "dgvit_fmnist", *files[i::4]], stdout=subprocess.PIPE, text=True)
             for i in range(4)]
    together = {}
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        together.update({l["file"]: l for l in json_lines(out)})
    assert together.keys() == alone.keys()
    for f, line in together.items():
        assert line["label"] == alone[f]["label"]
        assert abs(line["score"] - alone[f]["score"]) < 1e-5


def test_expired_deadline_is_deadline_exceeded(server, pngs, tmp_path):
    # The model batches with a 10-minute delay, so a request with a 1 s deadline is still
    # queued when its deadline passes, whatever the machine's speed.
    repo = tmp_path / "repo"
    (repo / "dgvit_fmnist" / "1").mkdir(parents=True)
    # A copy: a symlink leaving the repository is refused (docs/reliability.md).
    (repo / "dgvit_fmnist" / "1" / "model.pt").write_bytes(
        (REPO / "model_repository" / "dgvit_fmnist" / "1" / "model.pt").read_bytes())
    (repo / "dgvit_fmnist" / "config.pbtxt").write_text(
        "max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 600000000 }")
    slow = start_server(tmp_path, repo)
    try:
        res = slow.client("predict", "--model", "dgvit_fmnist", "--timeout-ms", "1000",
                          str(pngs[0][0]))
        assert res.returncode == 2
        assert json_lines(res.stdout)[0]["error"]["code"] == "DEADLINE_EXCEEDED"
    finally:
        assert stop_server(slow) == 0, slow.log()
    res = server.client("predict", "--model", "dgvit_fmnist", str(pngs[0][0]))
    assert res.returncode == 0


def test_config_pbtxt_dynamic_batching_forms_batches(tmp_path, pngs):
    """A Triton-style config.pbtxt turns on batching and two instances: concurrent clients
    then share batches, and each still gets exactly its own answer. The delay is 10 minutes
    and the preferred size 8, so a batch runs exactly when the 8 clients' requests are all
    queued: every batch has 8, on any machine."""
    import subprocess
    repo = tmp_path / "repo"
    (repo / "dgvit_fmnist" / "1").mkdir(parents=True)
    (repo / "dgvit_fmnist" / "1" / "model.pt").write_bytes(
        (REPO / "model_repository" / "dgvit_fmnist" / "1" / "model.pt").read_bytes())
    (repo / "dgvit_fmnist" / "config.pbtxt").write_text(
        "max_batch_size: 8\n"
        "dynamic_batching { preferred_batch_size: 8 max_queue_delay_microseconds: 600000000 }\n"
        "instance_group { count: 2 }\n")
    srv = start_server(tmp_path, repo)
    try:
        files = [str(p) for p, _ in pngs[:64]]
        client = str(BUILD / "client" / "gatescope-client")
        procs = [subprocess.Popen([client, "predict", "--server", srv.address, "--model",
                                   "dgvit_fmnist", *files[i::8]], stdout=subprocess.PIPE,
                                  text=True) for i in range(8)]
        got = {}
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0
            got.update({l["file"]: l for l in json_lines(out)})
        probs = python_probabilities("dgvit_fmnist", START, 64)
        for i, f in enumerate(files):
            assert got[f]["label"] == fashion_mnist.CLASS_NAMES[int(probs[i].argmax())]
            assert abs(got[f]["score"] - float(probs[i].max())) < 1e-4
        body = urllib.request.urlopen(
            f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).read().decode()
        metric = {l.split()[0]: float(l.split()[1]) for l in body.splitlines()
                  if l.startswith("gatescope_batch_size_")}
        count = metric['gatescope_batch_size_count{model="dgvit_fmnist"}']
        total = metric['gatescope_batch_size_sum{model="dgvit_fmnist"}']
        assert (total, count) == (64, 8)  # eight batches of eight
    finally:
        assert stop_server(srv) == 0


def batch_size_histogram(server, model):
    """(sum, count) of the server's gatescope_batch_size histogram of `model`: examples and
    executions so far."""
    body = urllib.request.urlopen(
        f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    metric = {l.split()[0]: float(l.split()[1]) for l in body.splitlines()
              if l.startswith("gatescope_batch_size_")}
    return (metric.get(f'gatescope_batch_size_sum{{model="{model}"}}', 0),
            metric.get(f'gatescope_batch_size_count{{model="{model}"}}', 0))


@pytest.fixture(scope="module")
def large_pngs(tmp_path_factory):
    """Seven held-out images drawn at 168 x 168 (each pixel six times over): above the
    128 x 128 the server decodes on the receiving thread, so it decodes them on its
    preparation pool."""
    from gatescope.data.png import encode_gray_png
    out = tmp_path_factory.mktemp("large_png")
    images, _ = fashion_mnist.load_split("t10k")
    paths = []
    for i in range(7):
        path = out / f"{i}.png"
        path.write_bytes(encode_gray_png(np.kron(images[START + i], np.ones((6, 6), np.uint8))))
        paths.append(path)
    return paths


@pytest.mark.parametrize("size", ["28x28", "168x168"])
@pytest.mark.parametrize("api", [["kserve"], ["kserve", "--streaming"], ["rest"]])
def test_load_generator_sends_several_inputs_per_request(server, pngs, large_pngs, api, size):
    """--batch-size 4 at concurrency 1: every request carries four images, so each of the
    server's executions of the model is a batch of exactly four (one request at a time
    cannot be batched with another), and inferences_per_s is four times the request rate.
    Sent one at a time, every execution would be a batch of one. Small images are decoded
    on the thread that receives the call, large ones on the preparation pool, in parallel:
    either way the call's examples reach the queue together."""
    address = f"127.0.0.1:{server.http_port}" if api == ["rest"] else server.address
    files = [p for p, _ in pngs[:7]] if size == "28x28" else large_pngs
    before = batch_size_histogram(server, "vit_fmnist")
    cmd = [str(BUILD / "client" / "gatescope-perf"), "--server", address,
           "--model", "vit_fmnist", "--api", *api, "--batch-size", "4", "--concurrency", "1",
           "--warmup-ms", "200", "--window-ms", "300", "--max-windows", "3",
           *[str(p) for p in files]]  # 7 files: the requests' images wrap around
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = json_lines(out.stdout)[-1]
    assert row["batch_size"] == 4 and row["ok"] > 0 and row["errors"] == {}
    assert row["inferences_per_s"] == pytest.approx(4 * row["throughput"])
    examples, executions = (a - b for a, b in zip(batch_size_histogram(server, "vit_fmnist"),
                                                  before))
    assert executions >= row["ok"] and examples == 4 * executions


@pytest.mark.parametrize("api", [["kserve"], ["rest"]])
def test_load_generator_refuses_a_batch_above_the_model_s_maximum(server, pngs, api):
    """vit_fmnist serves batches of at most 32: --batch-size 33 stops before any load,
    naming the bound, whatever --inputs says."""
    address = f"127.0.0.1:{server.http_port}" if api == ["rest"] else server.address
    for kind in ("auto", "image"):
        cmd = [str(BUILD / "client" / "gatescope-perf"), "--server", address, "--model",
               "vit_fmnist", "--api", *api, "--batch-size", "33", "--inputs", kind,
               str(pngs[0][0])]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and out.stdout == ""
        assert "--batch-size 33 exceeds vit_fmnist's max_batch_size 32" in out.stderr


def established_connections(pid, port):
    """How many TCP connections process `pid` has open and established to local `port`
    (its socket descriptors matched against the kernel's tables by inode)."""
    import os
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                count += fields[3] == "01" and remote_port == port and fields[9] in inodes
    return count


@pytest.mark.parametrize("api", [["gatescope"], ["kserve", "--streaming"]])
def test_load_generator_opens_the_connections_asked_for(server, pngs, api):
    """--connections N: the sending threads share N TCP connections (no more than there are
    threads), counted in the kernel's tables while the load runs; the JSON says how many."""
    import time
    port = int(server.address.rsplit(":", 1)[1])
    for connections, concurrency, expected in ((1, 4, 1), (3, 6, 3), (8, 2, 2)):
        cmd = [str(BUILD / "client" / "gatescope-perf"), "--server", server.address,
               "--model", "vit_fmnist", "--api", *api, "--concurrency", str(concurrency),
               "--connections", str(connections), "--warmup-ms", "600", "--window-ms", "300",
               "--max-windows", "3", *[str(p) for p, _ in pngs[:8]]]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = 0
        while proc.poll() is None:
            try:
                seen = max(seen, established_connections(proc.pid, port))
            except FileNotFoundError:
                break  # it ended between poll and the count
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        row = json_lines(out)[-1]
        assert row["errors"] == {} and row["ok"] > 0
        assert row["connections"] == expected and seen == expected, (connections, seen, row)


@pytest.mark.parametrize("api", [["gatescope"], ["kserve"], ["kserve", "--streaming"], ["rest"]])
def test_load_generator_reports_client_and_server_split(server, pngs, api):
    """Every API, REST included (its load, metadata and statistics over HTTP alone): all
    requests succeed and the server's split comes back."""
    import subprocess
    address = f"127.0.0.1:{server.http_port}" if api == ["rest"] else server.address
    cmd = [str(BUILD / "client" / "gatescope-perf"), "--server", address,
           "--model", "vit_fmnist", "--api", *api, "--concurrency-range", "1:4:3",
           "--warmup-ms", "300", "--window-ms", "400", "--max-windows", "3",
           *[str(p) for p, _ in pngs[:8]]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json_lines(out.stdout)
    assert [r["concurrency"] for r in rows] == [1, 4]
    for r in rows:
        assert r["ok"] > 0 and r["errors"] == {} and r["throughput"] > 0
        assert 0 < r["p50_us"] <= r["p90_us"] <= r["p95_us"] <= r["p99_us"]
        assert r["server_compute_infer_us"] > 0 and r["server_queue_us"] >= 0
