"""Monitoring as code (deploy/monitoring/): the rules pass promtool's checks and unit tests,
the drift references match the model cards, every metric the rules, dashboard and
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

from gatescope.data import fashion_mnist
from gatescope.export.monitoring_reference import read_reference
from server_harness import REPO, api_stubs, serve_shipped

MONITORING = REPO / "deploy" / "monitoring"
RULE_FILES = {"gatescope-rules.yaml": MONITORING / "prometheusrule.yaml",
              "gatescope-references.yaml": MONITORING / "prometheusrule-references.yaml"}
DASHBOARD = MONITORING / "gatescope-dashboard.json"
STATISTIC_MODELS = ["dgvit_fmnist", "darvit_fmnist"]
MODELS = STATISTIC_MODELS + ["vit_fmnist"]


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
            "GatescopeModelNotReady", "GatescopeGateDrift",
            "GatescopeVigilanceDrift"} <= alerts
    tests = yaml.safe_load((MONITORING / "tests" / "alerts_test.yaml").read_text())["tests"]
    fired = {case["alertname"] for t in tests for case in t.get("alert_rule_test", [])
             if case["exp_alerts"]}
    assert alerts == fired


def test_drift_references_are_the_model_cards():
    """prometheusrule-references.yaml is what drift_rules.py makes of today's cards, and
    each card's reference has one mean per layer of its model."""
    result = subprocess.run(["/usr/bin/python3", str(MONITORING / "drift_rules.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    recorded = {(r["record"], r["labels"]["model"], r["labels"]["layer"]): r["expr"]
                for r in rules() if r.get("record", "").endswith(":reference")}
    for model in STATISTIC_MODELS:
        [reference] = read_reference(REPO / "model_repository" / model / "README.md")
        assert len(reference["mean"]) == 4 and 0 < min(reference["mean"]) < 1
        prefix = {"gatescope_gate_mean": "gatescope:gate_mean",
                  "gatescope_vigilance_crossing":
                      "gatescope:vigilance_crossing"}[reference["metric"]]
        for layer, mean in enumerate(reference["mean"]):
            assert recorded[(f"{prefix}:reference", model, str(layer))] == f"vector({mean})"


def test_dashboard_reads_only_defined_series():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "gatescope"
    titles = [p["title"] for p in dashboard["panels"]]
    for wanted in ("Requests per second", "Request latency p50 / p99", "Batch size (mean)",
                   "Queue", "M-DGSA gate mean per layer vs card"):
        assert wanted in titles
    recorded = {r["record"] for r in rules() if "record" in r}
    used = {name for q in dashboard_queries() + [r["expr"] for r in rules()]
            for name in re.findall(r"gatescope:[a-z0-9_:]+", q)}
    assert used and used <= recorded, used - recorded


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, MODELS)


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


def send(stub, kv, model, images):
    for i in range(0, len(images), 16):
        req = kv.ModelInferRequest(model_name=model)
        req.inputs.add(name="input", datatype="UINT8", shape=[16, 28, 28])
        req.raw_input_contents.append(np.ascontiguousarray(images[i:i + 16]).tobytes())
        stub.ModelInfer(req, timeout=60)


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
    for model in STATISTIC_MODELS:
        name = {"dgvit_fmnist": "gatescope_gate_mean_count",
                "darvit_fmnist": "gatescope_vigilance_crossing_count"}[model]
        await_query(prometheus, f'{name}{{model="{model}", layer="3"}} == 16')
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
    await_query(prometheus,
                f'count(gatescope:requests:rate5m{{job="gatescope"}} > 0) == {len(MODELS)}')
    rates = query(prometheus, 'gatescope:requests:rate5m{job="gatescope"} > 0')
    assert {r["metric"]["model"] for r in rates} == set(MODELS)
    errors = await_query(prometheus, 'gatescope:request_errors:ratio_rate5m')
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
