"""The command lines of gatescope-client and gatescope-perf: every command's --help exits 0
and shows the defaults; a bad command line exits 2 with the reason (naming the flag) on
stderr and nothing on stdout. No server is needed: a command line that parses is run
against a closed port and fails per input, which shows it got past the parser."""
import json
import subprocess

import pytest

from server_harness import BUILD, REPO

CLIENT = BUILD / "client" / "gatescope-client"
PERF = BUILD / "client" / "gatescope-perf"
CLOSED = "127.0.0.1:1"  # nothing listens there: calls fail at once with UNAVAILABLE


def run(tool, *args):
    return subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("command, defaults", [
    ([], ["predict", "explain", "models", "health", "services"]),
    (["predict"], ["--server TEXT=127.0.0.1:8001", "--top-k INT:[1, 1000]=5",
                   "--timeout-ms INT:[1, 3600000]=30000", "=uint8", "--score-threshold",
                   "[0, 1)", "--max-detections", "[1, 10000]", "REQUIRED"]),
    (["explain"], ["--server TEXT=127.0.0.1:8001", "=60000", "--format", "=npy",
                   "--head-fusion", "=mean", "--signed", "=clamp", "--discard-ratio",
                   "[0, 1)=0", "--start-layer", "--layers", "--compare", "--query"]),
    (["models"], ["--server TEXT=127.0.0.1:8001"]),
    (["health"], ["--server TEXT=127.0.0.1:8001", "--service"]),
    (["services"], ["--server TEXT=127.0.0.1:8001"]),
])
def test_client_help_shows_defaults(command, defaults):
    res = run(CLIENT, *command, "--help")
    assert res.returncode == 0, res.stderr
    assert "Usage:" in res.stdout and res.stderr == ""
    for text in defaults:
        assert text in res.stdout, (text, res.stdout)


def test_perf_help_shows_defaults():
    res = run(PERF, "--help")
    assert res.returncode == 0, res.stderr
    for text in ["--server TEXT=127.0.0.1:8001", "--api", "=gatescope", "--concurrency",
                 "[1, 1024]=1", "--concurrency-range", "--request-rate", "--warmup-ms",
                 "=2000", "--window-ms", "--stability", "=0.1", "--max-windows", "[3, 1000]=10",
                 "--timeout-ms", "=30000", "--format", "=json", "--inputs", "=auto", "--streaming",
                 "--batch-size", "[1, 1024]=1", "--connections", "INPUT"]:
        assert text in res.stdout, (text, res.stdout)


P = ["predict", "--server", CLOSED]
E = ["explain", "--server", CLOSED]
REJECTED = [
    # (command line, what stderr must name)
    (P + ["--model", "m", "--topk", "3", "a.png"], "--topk"),
    (P + ["--model", "m", "--top-k", "abc", "a.png"], "--top-k"),
    (P + ["--model", "m", "--top-k", "0", "a.png"], "--top-k"),
    (P + ["--model", "m", "--top-k", "1001", "a.png"], "--top-k"),
    (P + ["--model", "m", "--top-k"], "--top-k"),
    (P + ["--model", "m", "--timeout-ms", "0", "a.png"], "--timeout-ms"),
    (P + ["--model", "m", "--score-threshold", "abc", "a.png"], "--score-threshold"),
    (P + ["--model", "m", "--score-threshold", "1.5", "a.png"], "--score-threshold"),
    (P + ["--model", "m", "--score-threshold", "1", "a.png"], "--score-threshold"),
    (P + ["--model", "m", "--max-detections", "-1", "a.png"], "--max-detections"),
    (P + ["--model", "m", "--max-detections", "0", "a.png"], "--max-detections"),
    (P + ["--model", "m", "--raw-shape", "1,x", "a.u8"], "--raw-shape"),
    (P + ["--model", "m", "--raw-shape", "0,28", "a.u8"], "--raw-shape"),
    (P + ["--model", "m", "--raw-shape", "28,28", "--raw-dtype", "int8", "a.u8"], "--raw-dtype"),
    (P + ["--model", "m", "--raw-dtype", "float32", "a.u8"], "--raw-dtype"),
    (P + ["--model", "m", "--probabilities", "a.png"], "--probabilities"),
    (P + ["a.png"], "--model"),
    (P + ["--model", "m"], "FILE"),
    (P + ["--model", "m", "--image", "a.png", "--image", "b.png"], "--image"),
    (E + ["--model", "m", "--out", "o", "--layers", "last", "a.png"], "--layers"),
    (E + ["--model", "m", "--out", "o", "--layers", "0,-1", "a.png"], "--layers"),
    (E + ["--model", "m", "--out", "o", "--heads", "x", "a.png"], "--heads"),
    (E + ["--model", "m", "--out", "o", "--format", "xml", "a.png"], "--format"),
    (E + ["--model", "m", "--out", "o", "--head-fusion", "avg", "a.png"], "--head-fusion"),
    (E + ["--model", "m", "--out", "o", "--signed", "neg", "a.png"], "--signed"),
    (E + ["--model", "m", "--out", "o", "--discard-ratio", "1.5", "a.png"], "--discard-ratio"),
    (E + ["--model", "m", "--out", "o", "--start-layer", "-1", "a.png"], "--start-layer"),
    (E + ["--model", "m", "--out", "o", "--query", "5", "a.png"], "--query"),
    (E + ["--model", "m", "--out", "o", "--query", "5,6,7", "a.png"], "--query"),
    (E + ["--model", "m", "--out", "o", "--query", "y,x", "a.png"], "--query"),
    (E + ["--model", "m", "--out", "o", "--score-threshold", "1.5", "a.png"],
     "--score-threshold"),
    (E + ["--model", "m", "--out", "o", "--timeout-ms", "0", "a.png"], "--timeout-ms"),
    (E + ["--model", "m", "--out", "o", "--rollot", "a.png"], "--rollot"),
    (E + ["--model", "m", "a.png"], "--out"),
    (E + ["--out", "o", "a.png"], "--model"),
    (E + ["--model", "m", "--compare", "a,b", "--out", "o", "a.png"], "--compare"),
    (E + ["--model", "m", "--out", "o"], "FILE"),
    (["models", "--server", CLOSED, "--model", "m"], "--model"),
    (["health", "--server", CLOSED, "--service"], "--service"),
    (["services", "--server", CLOSED, "extra"], "extra"),
    (["predicts", "--model", "m", "a.png"], "predicts"),
    ([], "A command is required"),
]


@pytest.mark.parametrize("args, named", REJECTED,
                         ids=[" ".join(a).replace(CLOSED, "ADDR") or "(none)" for a, _ in REJECTED])
def test_client_rejects_bad_command_lines(args, named, tmp_path):
    res = subprocess.run([str(CLIENT), *args], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stdout == ""
    assert named in res.stderr, res.stderr
    assert not (tmp_path / "o").exists()  # nothing ran


PERF_REJECTED = [
    (["--concurrency", "0"], "--concurrency"),
    (["--concurrency", "abc"], "--concurrency"),
    (["--api", "foo"], "--api"),
    (["--concurrency-range", "4:1"], "--concurrency-range"),
    (["--concurrency-range", "1"], "--concurrency-range"),
    (["--concurrency-range", "0:4"], "--concurrency-range"),
    (["--concurrency-range", "1:4", "--concurrency", "2"], "--concurrency"),
    (["--request-rate", "-1"], "--request-rate"),
    (["--max-windows", "2"], "--max-windows"),
    (["--window-ms", "0"], "--window-ms"),
    (["--stability", "0"], "--stability"),
    (["--timeout-ms", "0"], "--timeout-ms"),
    (["--format", "xml"], "--format"),
    (["--concurency", "2"], "--concurency"),
    (["--streaming"], "--streaming needs --api kserve"),
    (["--api", "gatescope", "--streaming"], "--streaming needs --api kserve"),
    (["--api", "rest", "--streaming"], "--streaming needs --api kserve"),
    (["--batch-size", "0"], "--batch-size"),
    (["--batch-size", "1025"], "--batch-size"),
    (["--batch-size", "2"], "--batch-size above 1 needs --api kserve or rest"),
    (["--api", "gatescope", "--batch-size", "4"], "--batch-size above 1 needs --api kserve"),
    (["--api", "rest", "--tls-cert", "c.pem"], "--tls-cert needs --tls-key"),
    (["--api", "rest", "--tls-ca", "missing.pem"], "--tls-ca 'missing.pem'"),
    (["--connections", "0"], "--connections"),
    (["--connections", "1025"], "--connections"),
    (["--api", "rest", "--connections", "2"], "--connections is for the gRPC APIs"),
]


@pytest.mark.parametrize("args, named", PERF_REJECTED, ids=[" ".join(a) for a, _ in PERF_REJECTED])
def test_perf_rejects_bad_command_lines(args, named):
    res = run(PERF, "--server", CLOSED, "--model", "m", *args, "a.png")
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stdout == ""
    assert named in res.stderr, res.stderr


def test_perf_rest_needs_a_port():
    res = run(PERF, "--server", "localhost", "--api", "rest", "--model", "m", "a.png")
    assert res.returncode == 2 and res.stdout == ""
    assert "is not HOST:PORT of the REST API" in res.stderr, res.stderr


def test_perf_rest_goes_to_the_default_http_port_without_server():
    """--api rest without --server: the REST API's default address, named when it fails
    (the model's task is asked first)."""
    res = subprocess.run([str(PERF), "--api", "rest", "--model", "m", "--timeout-ms", "2000",
                          "a.png"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert "GET http://127.0.0.1:8000/v2/models/m/gatescope" in res.stderr, res.stderr


def test_perf_needs_a_model_and_inputs():
    for args, named in ((["a.png"], "--model"), (["--model", "m"], "INPUT")):
        res = run(PERF, "--server", CLOSED, *args)
        assert res.returncode == 2 and res.stdout == "" and named in res.stderr, res.stderr


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_valid_command_lines_get_past_the_parser(tmp_path):
    """Lists after flags do not swallow the inputs, --image comes first, and each input
    fails alone when the server cannot be reached (exit 2, one line per input)."""
    out = tmp_path / "out"
    res = run(CLIENT, *E, "--model", "m", "--layers", "0,2", "--heads=1", "--queries", "0",
              "--rollout", "--out", out, "--image", "first.png", "a.png", "b.png")
    assert res.returncode == 2 and res.stderr == "", res.stderr
    lines = json_lines(res.stdout)
    assert [l["file"] for l in lines] == ["first.png", "a.png", "b.png"]
    assert all(l["error"]["code"] == "UNAVAILABLE" for l in lines)
    assert out.is_dir()

    res = run(CLIENT, *P, "--model", "m", "--top-k", "3", "--raw-shape", "1,28,28",
              "--raw-dtype", "float32", "--score-threshold", "0.5", "--max-detections", "4",
              "x.f32")
    assert res.returncode == 2 and res.stderr == ""
    assert [l["file"] for l in json_lines(res.stdout)] == ["x.f32"]

    # Every run leaves run.json; a second one needs its own directory (or --overwrite).
    assert json.loads((out / "run.json").read_text())["failures"] == 3
    res = run(CLIENT, *E, "--compare", "m1,m2", "--out", out, "--overwrite", "--discard-ratio", "0.9",
              "--head-fusion", "max", "--signed", "raw", "--start-layer", "1", "missing.png")
    assert res.returncode == 2 and res.stderr == ""
    assert json_lines(res.stdout)[0]["error"] == {"code": "CLIENT", "message": "cannot read file"}

    res = run(CLIENT, "health", "--server", CLOSED, "--service", "m")
    assert res.returncode == 2 and json_lines(res.stdout)[0]["error"]["code"] == "UNAVAILABLE"


def test_an_output_directory_that_cannot_be_made_stops_the_command(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = run(CLIENT, *P, "--model", "m", "--out", blocker / "sub", "a.png")
    assert res.returncode == 1 and res.stdout == ""
    assert "cannot create the output directory" in res.stderr


SERVER = BUILD / "server" / "gatescope-server"


def test_server_help_lists_every_flag_with_its_default():
    res = run(SERVER, "--help")
    assert res.returncode == 0, res.stderr
    for text in ["usage: gatescope-server", "--model_repository", 'default: "model_repository"',
                 "--grpc_port", "default: 8001", "--metrics_port", "default: 8002",
                 "--max_batch_size", "default: 16", "--model_control", 'default: "none"',
                 "--explain_max_bytes", "default: 268435456", "--drain_seconds"]:
        assert text in res.stdout, (text, res.stdout)


@pytest.mark.parametrize("args, reason", [
    (["--grpc-port=8001"], "grpc-port"),          # a typo'd flag
    (["--grpc_port=abc"], "grpc_port"),           # unparsable
    (["--grpc_port=70000"], "grpc_port"),         # out of range
    (["--metrics_port=-2"], "metrics_port"),
    (["--grpc_unix_socket=/" + "s" * 120], "grpc_unix_socket"),
    (["--max_batch_size=0"], "max_batch_size"),
    (["--instances=65"], "instances"),
    (["--max_queue_delay_us=-1"], "max_queue_delay"),
    (["--model_control=sometimes"], "model_control"),
    (["--explain_max_bytes=0"], "explain_max_bytes"),
    (["model_repository"], "unexpected argument"),  # a stray argument
])
def test_server_refuses_a_bad_command_line_with_exit_2(args, reason):
    res = run(SERVER, *args)
    assert res.returncode == 2, (args, res.returncode, res.stderr)
    assert reason in res.stderr, (reason, res.stderr)
