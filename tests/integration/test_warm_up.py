"""Models warm up before they serve (--warm_up, server/tasks/instance_warm_up.h): every
instance runs its forwards on a zero example at load, image and text models alike; the
warm-up is not counted as inferences; --warm_up=false leaves the first request to pay."""
import shutil

import numpy as np

from server_harness import REPO, metric_value, start_server, stop_server
from gatescope.data.fashion_mnist import write_pngs
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
