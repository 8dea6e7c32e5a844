"""Models warm up before they serve (--warm_up, server/tasks/instance_warm_up.h): every
instance runs its forwards on a zero example at load, image and text models alike; the
warm-up is not counted as inferences; --warm_up=false leaves the first request to pay;
config.pbtxt's model_warmup samples replace the default, their data zeros, noise or a file
of the model's warmup/ directory, as in Triton."""
import shutil
import struct

import numpy as np

from server_harness import REPO, metric_value, start_server, stop_server
from gatescope.data.fashion_mnist import load_split, write_pngs
from gatescope_client.client import Client

MODELS = ["vit_fmnist", "dgt_wordnet"]


def repository(tmp_path):
    repo = tmp_path / "repo"
    for name in MODELS:
        shutil.copytree(REPO / "model_repository" / name, repo / name)
    return repo


def test_each_model_warms_up_before_it_serves_and_is_not_counted(tmp_path):
    (png, _), = write_pngs(tmp_path / "png", start=9000, count=1)
    srv = start_server(tmp_path, repository(tmp_path))
    try:
        log = srv.log()
        for name in MODELS:
            assert f"{name} version 1 group0_0: warmed up with 2 forward(s)" in log, log
        assert "warm-up stopped" not in log
        for name in MODELS:
            assert not metric_value(srv, "gatescope_executions_total", model=name)
        client = Client(f"http://127.0.0.1:{srv.http_port}", timeout=60)
        out = client.infer("vit_fmnist", {"input": np.array([png.read_bytes()], dtype=object)})
        assert out["logits"].shape == (1, 10)
        # One request, one forward counted: the two warm-up forwards are not.
        assert metric_value(srv, "gatescope_inferences_total", model="vit_fmnist") == 1
        assert metric_value(srv, "gatescope_executions_total", model="vit_fmnist") == 1
    finally:
        assert stop_server(srv) == 0


def test_without_warm_up_no_forward_runs_at_load(tmp_path):
    srv = start_server(tmp_path, repository(tmp_path), extra=["--warm_up=false"])
    try:
        assert "warmed up" not in srv.log()
    finally:
        assert stop_server(srv) == 0


def test_config_pbtxt_model_warmup_samples_replace_the_default(tmp_path):
    repo = repository(tmp_path)
    config = repo / "vit_fmnist" / "config.pbtxt"
    config.write_text(config.read_text() + """
model_warmup {
  name: "noise" batch_size: 4 count: 3
  inputs { key: "input" value { data_type: TYPE_FP32 dims: [ 1, 28, 28 ] random_data: true } }
}
""")
    srv = start_server(tmp_path, repo)
    try:
        log = srv.log()
        assert "vit_fmnist version 1 group0_0: warmed up with 3 forward(s)" in log, log
        assert "dgt_wordnet version 1 group0_0: warmed up with 2 forward(s)" in log, log
        client = Client(f"http://127.0.0.1:{srv.http_port}", timeout=60)
        assert client.model_ready("vit_fmnist")
    finally:
        assert stop_server(srv) == 0


def test_model_warmup_samples_read_their_files_from_the_warmup_directory(tmp_path):
    """An image's raw FP32 values and a text as one KServe BYTES element, each from a
    file under <model>/warmup/; a file that does not fit fails the model's load, with
    why, and leaves the other models serving."""
    pixels = load_split("t10k")[0][9000].astype(np.float32) / 255.0  # [28, 28]
    repo = repository(tmp_path)
    shutil.copytree(REPO / "model_repository" / "vit_fmnist", repo / "vit_short")
    shutil.copytree(REPO / "model_repository" / "dgt_wordnet", repo / "dgt_latin1")
    samples = {
        "vit_fmnist": ("TYPE_FP32", "[ 1, 28, 28 ]", "input", pixels.tobytes()),
        "vit_short": ("TYPE_FP32", "[ 1, 28, 28 ]", "input", pixels.tobytes()[:-4]),
        "dgt_wordnet": ("TYPE_STRING", "[ 1 ]", "text",
                        struct.pack("<I", 27) + b"a small domesticated feline"),
        # Not UTF-8: the file's text reaches the model's tokenizer, which refuses it.
        "dgt_latin1": ("TYPE_STRING", "[ 1 ]", "text", struct.pack("<I", 4) + b"caf\xe9"),
    }
    for name, (data_type, dims, input_name, data) in samples.items():
        (repo / name / "warmup").mkdir()
        (repo / name / "warmup" / "sample.bin").write_bytes(data)
        config = repo / name / "config.pbtxt"
        config.write_text(config.read_text() + f"""
model_warmup {{
  name: "from_file" batch_size: 2 count: 2
  inputs {{ key: "{input_name}" value {{ data_type: {data_type} dims: {dims}
                                        input_data_file: "sample.bin" }} }}
}}
""")
    srv = start_server(tmp_path, repo)
    try:
        log = srv.log()
        for name in ("vit_fmnist", "dgt_wordnet"):
            assert f"{name} version 1 group0_0: warmed up with 2 forward(s)" in log, log
        assert ("failed to load vit_short/1: INVALID_ARGUMENT: model_warmup 'from_file': "
                "input_data_file 'sample.bin' holds 3132 bytes; dims [1,28,28] of FP32 need "
                "3136") in log, log
        assert ("failed to load dgt_latin1/1: INVALID_ARGUMENT: model_warmup 'from_file': the "
                "text of 'sample.bin': ") in log, log
        assert "warm-up stopped" not in log
        client = Client(f"http://127.0.0.1:{srv.http_port}", timeout=60)
        assert client.model_ready("vit_fmnist") and client.model_ready("dgt_wordnet")
        assert not client.model_ready("vit_short") and not client.model_ready("dgt_latin1")
    finally:
        assert stop_server(srv) == 0
