"""Monitoring as code (deploy/monitoring/): the rules pass promtool's checks and unit tests,
the drift rules are current and cover every statistic a card references, the server exports
each card's references and every statistic of the models it serves (M-DGSA, DAR, PLuG and
GDLA gates) with predict and explain latency apart, every metric the rules, dashboard and
autoscaler read exists on a running server, and a real Prometheus scraping a running
gatescope evaluates every rule without error and records what the server served."""
import json
import pathlib
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest
import yaml

from gatescope.data import colin27, detection_scenes, fashion_mnist
from gatescope.export.monitoring_reference import read_reference
from server_harness import REPO, api_stubs, metric_value, serve_shipped

MONITORING = REPO / "deploy" / "monitoring"
RULE_FILES = {"gatescope-rules.yaml": MONITORING / "prometheusrule.yaml",
              "gatescope-drift.yaml": MONITORING / "prometheusrule-drift.yaml"}
DASHBOARD = MONITORING / "gatescope-dashboard.json"
# Fashion-MNIST models that get the two rounds of traffic below, by the histogram they feed.
STATISTIC_MODELS = {"dgvit_fmnist": "gatescope_gate_mean",
                    "darvit_fmnist": "gatescope_vigilance_crossing"}
MODELS = list(STATISTIC_MODELS) + ["vit_fmnist"]
# Models with PLuG and GDLA gates: a few examples each, enough for their series.
GATED = {"plug_deit_fmnist": "gatescope_plug_scale_mean",
         "plug_detr_scenes": "gatescope_plug_scale_mean",
         "pvt_gdla_colin27": "gatescope_gdla_gate_mean"}
GATED_EXAMPLES = {"plug_deit_fmnist": 4, "plug_detr_scenes": 2, "pvt_gdla_colin27": 2}


def tool(name):
    path = shutil.which(name)
    assert path, f"{name} is not installed (Debian package prometheus; scripts/setup.sh)"
    return path


def write_rule_files(out_dir, interval=None):
    """The PrometheusRules' specs as plain rule files in out_dir; `interval` overrides every
    group's evaluation interval (the live test evaluates every second)."""
    for name, source in RULE_FILES.items():
        spec = yaml.safe_load(source.read_text())["spec"]
        if interval:
            for group in spec["groups"]:
                group["interval"] = interval
        (out_dir / name).write_text(yaml.safe_dump(spec))
    return [out_dir / name for name in RULE_FILES]


def rules():
    return [r for source in RULE_FILES.values()
            for g in yaml.safe_load(source.read_text())["spec"]["groups"] for r in g["rules"]]


def dashboard_queries():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def autoscaling_queries():
    """seriesQuery / metricsQuery text of the prometheus-adapter rules under deploy/."""
    found = []
    for path in (REPO / "deploy").rglob("*.yaml"):
        text = path.read_text()
        found += re.findall(r"(?:seriesQuery|metricsQuery):\s*(.+)", text)
    return found


def test_rules_pass_promtool_check(tmp_path):
    files = write_rule_files(tmp_path)
    result = subprocess.run([tool("promtool"), "check", "rules", *map(str, files)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    for source in RULE_FILES.values():
        count = sum(len(g["rules"]) for g in yaml.safe_load(source.read_text())["spec"]["groups"])
        assert f"SUCCESS: {count} rules found" in result.stdout, result.stdout


def test_alert_unit_tests_pass(tmp_path):
    write_rule_files(tmp_path)
    shutil.copy(MONITORING / "tests" / "alerts_test.yaml", tmp_path)
    result = subprocess.run([tool("promtool"), "test", "rules", "alerts_test.yaml"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_fires_in_a_unit_test():
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert {"GatescopeHighErrorRatio", "GatescopeQueueSaturated", "GatescopeHighP99Latency",
            "GatescopeModelNotReady", "GatescopeGateDrift", "GatescopeVigilanceDrift",
            "GatescopePlugGateDrift", "GatescopeGdlaGateDrift"} <= alerts
    tests = yaml.safe_load((MONITORING / "tests" / "alerts_test.yaml").read_text())["tests"]
    fired = {case["alertname"] for t in tests for case in t.get("alert_rule_test", [])
             if case["exp_alerts"]}
    assert alerts == fired


def test_drift_rules_are_current_and_cover_every_card():
    """prometheusrule-drift.yaml is what drift_rules.py writes, every statistic a card
    references has its rules, and the rules read the references the server exports rather
    than constants of their own."""
    result = subprocess.run(["/usr/bin/python3", str(MONITORING / "drift_rules.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    recorded = {r["record"]: r["expr"] for r in rules() if "record" in r}
    cards = {r["metric"] for card in (REPO / "model_repository").glob("*/README.md")
             for r in read_reference(card)}
    assert set(STATISTIC_MODELS.values()) | set(GATED.values()) <= cards
    for metric in cards:
        statistic = metric.removeprefix("gatescope_")
        reference = recorded[f"gatescope:{statistic}:reference"]
        assert f'gatescope_reference_mean{{statistic="{statistic}"}}' in reference
        assert f"gatescope_{statistic}_sum" in recorded[f"gatescope:{statistic}:mean_rate30m"]
        assert "gatescope_reference_stddev" in recorded[f"gatescope:{statistic}:min_examples"]


def test_dashboard_reads_only_defined_series():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "gatescope"
    titles = [p["title"] for p in dashboard["panels"]]
    for wanted in ("Requests per second", "Request latency p50 / p99", "Batch size (mean)",
                   "Queue", "M-DGSA gate mean per layer vs card",
                   "DAR vigilance crossing per layer vs card",
                   "PLuG logit scale 1 + G per layer vs card",
                   "GDLA gate mean per decoder stage vs card"):
        assert wanted in titles
    recorded = {r["record"] for r in rules() if "record" in r}
    used = {name for q in dashboard_queries() + [r["expr"] for r in rules()]
            for name in re.findall(r"gatescope:[a-z0-9_:]+", q)}
    assert used and used <= recorded, used - recorded


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, MODELS + list(GATED))


def scrape(server):
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    return urllib.request.urlopen(url, timeout=10).read().decode()


def test_every_metric_read_by_rules_dashboard_and_autoscaler_exists(server, served):
    text = scrape(server)
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    queries = [r["expr"] for r in rules()] + dashboard_queries() + autoscaling_queries()
    assert autoscaling_queries(), "no prometheus-adapter rule under deploy/"
    used = {n for q in queries for n in re.findall(r"\bgatescope_[a-z_]+", q)}
    for name in sorted(used):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in families:
            continue
        assert families.get(base) == "histogram", f"{name} is not exported by the server"
    # The layer statistics the drift rules join on are exported for the served models.
    assert re.search(r'^gatescope_gate_mean_count\{layer="3",model="dgvit_fmnist"\} 80$',
                     text, re.M)
    assert re.search(r'^gatescope_vigilance_crossing_count\{layer="0",model="darvit_fmnist"\} 80$',
                     text, re.M)
    # Counters carry the _total suffix; no other counter is exported.
    counters = [name for name, kind in families.items() if kind == "counter"]
    assert counters and all(name.endswith("_total") for name in counters), counters


def test_served_plug_and_gdla_models_produce_their_statistics(server, served):
    """Each example a PLuG or GDLA model served is one observation per layer (decoder stage
    for GDLA), within five standard errors of its card (plus the card's 5-decimal rounding),
    in 0.01-wide buckets over the statistic's range."""
    for model, family in GATED.items():
        [reference] = read_reference(REPO / "model_repository" / model / "README.md")
        assert reference["metric"] == family
        n = GATED_EXAMPLES[model]
        for layer, (mean, std) in enumerate(zip(reference["mean"], reference["std"])):
            count = metric_value(server, family + "_count", model=model, layer=str(layer))
            total = metric_value(server, family + "_sum", model=model, layer=str(layer))
            assert count == n, (model, layer, count)
            assert abs(total / n - mean) <= 5 * std / np.sqrt(n) + 1e-4, (model, layer, total / n)
    bounds = [float(le) for le in re.findall(
        r'^gatescope_plug_scale_mean_bucket\{layer="0",model="plug_deit_fmnist",le="([^"]+)"\}',
        scrape(server), re.M)]
    assert len(bounds) == 201 and bounds[-1] == float("inf")
    assert np.allclose(np.diff(bounds[:-1]), 0.01) and bounds[-2] == 2.0


def test_server_exports_each_cards_references(server, served):
    """gatescope_reference_mean / _stddev of every served model with a card reference equal
    the numbers of its card."""
    text = scrape(server)
    for model in MODELS + list(GATED):
        for reference in read_reference(REPO / "model_repository" / model / "README.md"):
            statistic = reference["metric"].removeprefix("gatescope_")
            for layer, (mean, std) in enumerate(zip(reference["mean"], reference["std"])):
                labels = dict(model=model, statistic=statistic, layer=str(layer))
                assert metric_value(server, "gatescope_reference_mean", **labels) == mean
                assert metric_value(server, "gatescope_reference_stddev", **labels) == std
    # vit_fmnist's card has no reference: no series.
    assert 'model="vit_fmnist",statistic=' not in text


def test_kind_separates_predict_from_explain(server, served, tmp_path_factory):
    """A gatescope.v1 Explain and a KServe ModelInfer that asks for explanations count as
    kind="explain", a v1 Predict as kind="predict", in both the latency histogram and the
    requests counter."""
    stubs = api_stubs(server, tmp_path_factory)
    kv, kv_stub, v1, v1_stub = next(stubs)
    images, _ = fashion_mnist.load_split("t10k")
    model = "dgvit_fmnist"

    def counts():
        return {kind: (metric_value(server, "gatescope_request_duration_seconds_count",
                                    model=model, kind=kind) or 0,
                       metric_value(server, "gatescope_requests_total", model=model,
                                    kind=kind, code="OK") or 0)
                for kind in ("predict", "explain")}

    tensor = v1.Tensor(dtype=v1.Tensor.UINT8, shape=[28, 28], data=images[0].tobytes())
    before = counts()
    v1_stub.Explain(v1.ExplainRequest(model_name=model, tensor=tensor, rollout=True), timeout=60)
    req = kv.ModelInferRequest(model_name=model)
    req.inputs.add(name="input", datatype="UINT8", shape=[1, 28, 28])
    req.raw_input_contents.append(images[1].tobytes())
    req.parameters["explain"].string_param = "gates"
    kv_stub.ModelInfer(req, timeout=60)
    v1_stub.Predict(v1.PredictRequest(model_name=model, tensor=tensor), timeout=60)
    after = counts()
    assert after["explain"] == (before["explain"][0] + 2, before["explain"][1] + 2)
    assert after["predict"] == (before["predict"][0] + 1, before["predict"][1] + 1)
    next(stubs, None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def await_query(port, expr, timeout=60):
    deadline = time.time() + timeout
    while not (result := query(port, expr)):
        assert time.time() < deadline, f"{expr} returned nothing for {timeout} s"
        time.sleep(0.5)
    return result


@pytest.fixture(scope="module")
def prometheus(server, tmp_path_factory):
    """A real Prometheus (Debian's) scraping the server every second as job "gatescope" and
    evaluating the rules every second."""
    tmp = tmp_path_factory.mktemp("prometheus")
    files = write_rule_files(tmp, interval="1s")
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(f) for f in files],
              "scrape_configs": [{"job_name": "gatescope", "static_configs": [
                  {"targets": [f"127.0.0.1:{server.metrics_port}"]}]}]}
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp / "prometheus.log", "w")
    proc = subprocess.Popen([tool("prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, (tmp / "prometheus.log").read_text()
                assert time.time() < deadline, "prometheus did not become ready"
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def send(stub, kv, model, images, per_call=16):
    """uint8 images [N, H, W] (or [N, 1, H, W]) through KServe ModelInfer, `per_call` a call."""
    for i in range(0, len(images), per_call):
        batch = np.ascontiguousarray(images[i:i + per_call])
        req = kv.ModelInferRequest(model_name=model)
        req.inputs.add(name="input", datatype="UINT8", shape=list(batch.shape))
        req.raw_input_contents.append(batch.tobytes())
        stub.ModelInfer(req, timeout=120)


def send_gated(stub, kv):
    """GATED_EXAMPLES held-out examples to each PLuG / GDLA model: Fashion-MNIST test images,
    Colin27 held-out slices, held-out detection scenes (one a call: each has its own size)."""
    images, _ = fashion_mnist.load_split("t10k")
    send(stub, kv, "plug_deit_fmnist", images[:GATED_EXAMPLES["plug_deit_fmnist"]])
    slices = colin27.load_slices()["test"]["images"][:GATED_EXAMPLES["pvt_gdla_colin27"]]
    send(stub, kv, "pvt_gdla_colin27", slices[:, None])
    for image, _, _ in detection_scenes.make_scenes("heldout", GATED_EXAMPLES["plug_detr_scenes"],
                                                    1234):
        send(stub, kv, "plug_detr_scenes", image[None, None], per_call=1)


@pytest.fixture(scope="module")
def served(server, prometheus, tmp_path_factory):
    """Fashion-MNIST test images sent to each model (KServe ModelInfer, UINT8) in two
    rounds: 16 first, so that every series exists and Prometheus has scraped it, then 64
    more, which the rates over Prometheus' samples see. Returns the second round's count."""
    stubs = api_stubs(server, tmp_path_factory)
    kv, stub, _, _ = next(stubs)
    images, _ = fashion_mnist.load_split("t10k")
    for model in MODELS:
        send(stub, kv, model, images[:16])
    send_gated(stub, kv)
    for model, family in STATISTIC_MODELS.items():
        await_query(prometheus, f'{family}_count{{model="{model}", layer="3"}} == 16')
    await_query(prometheus, 'gatescope_requests_total{model="vit_fmnist", code="OK"} == 1')
    for model in MODELS:
        send(stub, kv, model, images[16:80])
    yield 64
    next(stubs, None)


def test_prometheus_records_what_the_server_served(prometheus, served):
    up = await_query(prometheus, 'up{job="gatescope"} == 1')
    assert len(up) == 1
    # Recording rules over the live series: the second round's examples, request rates.
    # Once the rules have evaluated over all of the second round: increase() sees at least
    # its 64 examples (it extrapolates towards the window's edges, so it may say more).
    for name in ("gatescope:gate_mean:examples_30m", "gatescope:vigilance_crossing:examples_30m"):
        await_query(prometheus, f"count({name} >= {served}) == 4")
    means = query(prometheus, 'gatescope:gate_mean:mean_rate30m{model="dgvit_fmnist"}')
    [reference] = read_reference(REPO / "model_repository" / "dgvit_fmnist" / "README.md")
    assert sorted(int(m["metric"]["layer"]) for m in means) == [0, 1, 2, 3]
    for m in means:
        layer = int(m["metric"]["layer"])
        # 64 test images against the card's 10,000: within five standard errors.
        bound = 5 * reference["std"][layer] / np.sqrt(served)
        assert abs(float(m["value"][1]) - reference["mean"][layer]) < bound, (m, reference)
    # The references the drift rules compare with are the card's, through the server.
    references = await_query(prometheus, 'gatescope:gate_mean:reference{model="dgvit_fmnist"}')
    assert {int(r["metric"]["layer"]): float(r["value"][1]) for r in references} == \
        dict(enumerate(reference["mean"]))
    await_query(prometheus, 'count(gatescope:plug_scale_mean:reference{job="gatescope"}) == 8')
    await_query(prometheus, 'count(gatescope:gdla_gate_mean:min_examples{job="gatescope"}) == 3')
    # Request rates of the models that had a second round (the gated models' one round
    # created their series: no increase Prometheus saw).
    await_query(prometheus, 'count(gatescope:requests:rate5m{job="gatescope", kind="predict"} > 0)'
                            f' == {len(MODELS)}')
    rates = query(prometheus, 'gatescope:requests:rate5m{job="gatescope", kind="predict"} > 0')
    assert {r["metric"]["model"] for r in rates} == set(MODELS)
    errors = await_query(prometheus, 'gatescope:request_errors:ratio_rate5m{model=~"%s"}'
                         % "|".join(MODELS))
    assert all(float(e["value"][1]) == 0 for e in errors)
    saturation = await_query(prometheus, 'gatescope:queue_saturation:ratio{model="vit_fmnist"}')
    assert float(saturation[0]["value"][1]) == 0


def test_prometheus_evaluates_every_rule_and_dashboard_query(prometheus, served):
    await_query(prometheus, "gatescope:batch_size:mean_rate5m")
    body = json.loads(urllib.request.urlopen(
        f"http://127.0.0.1:{prometheus}/api/v1/rules", timeout=10).read())
    evaluated = [r for g in body["data"]["groups"] for r in g["rules"]]
    assert len(evaluated) == len(rules())
    for r in evaluated:
        assert r["health"] == "ok", r
        if r["type"] == "alerting":
            assert r["state"] == "inactive", r  # a healthy server raises no alert
    for expr in dashboard_queries():
        query(prometheus, expr.replace("$model", ".*").replace("$__rate_interval", "1m"))
