"""(c) Values that must agree with each other and with the server, read from the rendered
base and overlays: shutdown timing, probes and ports, security, threads and resources, the
model volume, the autoscaler's metric and the prometheus-adapter rule, GPU only where meant."""
import os
import re
import subprocess

import pytest
import yaml

from deploy_manifests import (ADAPTER, BASE, GID, MODELS, MODELS_GPU, OVERLAY_CPU, OVERLAY_GPU,
                              SERVER_KUSTOMIZATIONS, SHUTDOWN_MARGIN_S, UID, adapter_rules, check_security, cpu_cores, documented_metrics,
                              exposed_name, find, flags, prestop_seconds, probe_port, probes, rel,
                              render, security, series_metric)



def server(directory):
    objects = render(directory)
    deployment = find(objects, "Deployment", "gatescope")
    pod = deployment["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "server")
    return objects, deployment, pod, container


overlays = pytest.mark.parametrize("directory", SERVER_KUSTOMIZATIONS, ids=rel)


@overlays
def test_grace_period_covers_prestop_and_drain(directory):
    _, _, pod, container = server(directory)
    args = flags(container)
    assert "drain_seconds" in args, "--drain_seconds must be given explicitly"
    drain = int(args["drain_seconds"])
    needed = prestop_seconds(container) + drain + SHUTDOWN_MARGIN_S
    assert pod["terminationGracePeriodSeconds"] >= needed, \
        f"grace {pod['terminationGracePeriodSeconds']} s < preStop + drain ({drain}) + {SHUTDOWN_MARGIN_S}"
    assert prestop_seconds(container) >= 1


@overlays
def test_ports_flags_and_probes_agree(directory):
    objects, deployment, pod, container = server(directory)
    args = flags(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["grpc"] == int(args["grpc_port"])
    assert ports["metrics"] == int(args["metrics_port"])
    assert ports["http"] == int(args["http_port"])  # KServe v2 REST
    assert args["host"] == "0.0.0.0", "the server must listen beyond the pod's loopback"
    found = probes(container)
    assert set(found) == {"startupProbe", "readinessProbe", "livenessProbe"}
    for name, probe in found.items():
        handler, port = probe_port(probe)
        assert handler == "grpc", f"{name} should use grpc.health.v1"
        assert port in ports.values() or port in ports, f"{name} targets undeclared port {port}"
        assert port == ports["grpc"], f"{name} must probe the gRPC port"
    startup = found["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, "allow model loading time"
    # The Service and the scrape annotations point at the same ports.
    names = {p["name"] for p in container["ports"]}
    for service in (o for o in objects if o["kind"] == "Service"):
        selector = service["spec"]["selector"]
        assert all(deployment["spec"]["template"]["metadata"]["labels"].get(k) == v
                   for k, v in selector.items()), f"Service {service['metadata']['name']} selects no pod"
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names or port["targetPort"] in ports.values()
            assert port.get("appProtocol"), f"{service['metadata']['name']}:{port['name']} has no appProtocol"
    main = find(objects, "Service", "gatescope")
    assert {p["name"] for p in main["spec"]["ports"]} == {"grpc", "http", "metrics"}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    assert annotations["prometheus.io/path"] == "/metrics"


@overlays
def test_security_context(directory):
    _, _, pod, container = server(directory)
    check_security(pod, container)
    assert pod.get("automountServiceAccountToken") is False


@overlays
def test_threads_match_cpu(directory):
    _, _, _, container = server(directory)
    args = flags(container)
    assert "torch_threads" in args, "--torch_threads must be explicit (the plan reads from the manifest)"
    threads, instances = int(args["torch_threads"]), int(args.get("instances", 1))
    assert threads >= 1
    resources = container["resources"]
    limit = cpu_cores(resources["limits"]["cpu"])
    assert threads * instances <= limit, f"{instances} instances x {threads} threads > {limit} cores"
    assert threads <= cpu_cores(resources["requests"]["cpu"])
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert int(env["OPENBLAS_NUM_THREADS"]) == threads
    # Guaranteed QoS: requests == limits for CPU and memory.
    for key in ("cpu", "memory"):
        assert str(resources["requests"][key]) == str(resources["limits"][key]), key


# The server's resident peak with the ten shipped models and the base's flags, measured by
# the soak (tests/soak, docs/soak.md): what the memory limit holds besides the gRPC quota
# and one explanation's cap.
MODELS_PEAK_BYTES = 1411 << 20


def memory_bytes(quantity) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 10**3, "M": 10**6, "G": 10**9}
    text = str(quantity)
    for suffix, scale in units.items():
        if text.endswith(suffix) and text[:-len(suffix)].isdigit():
            return int(text[:-len(suffix)]) * scale
    return int(text)


@overlays
def test_memory_bounds_fit_the_limit(directory):
    """gRPC's buffer quota (which must hold two largest messages) plus one explanation's
    maps plus the models' measured peak fit the memory limit; all three bounds are explicit."""
    _, _, _, container = server(directory)
    args = flags(container)
    quota, message = int(args["grpc_memory_bytes"]), int(args["max_message_bytes"])
    explain = int(args["explain_max_bytes"])
    assert quota >= 2 * message, "the server refuses a quota under 2 x max_message_bytes"
    limit = memory_bytes(container["resources"]["limits"]["memory"])
    assert quota + explain + MODELS_PEAK_BYTES <= limit, (quota, explain, limit)


@pytest.mark.parametrize("directory", [BASE, OVERLAY_CPU], ids=rel)
def test_cpu_serving_fills_its_cores(directory):
    _, _, _, container = server(directory)
    args = flags(container)
    assert int(args["torch_threads"]) * int(args["instances"]) == cpu_cores(container["resources"]["limits"]["cpu"])


@pytest.mark.parametrize("models,directory", [(MODELS, BASE), (MODELS, OVERLAY_CPU), (MODELS_GPU, OVERLAY_GPU)],
                         ids=lambda d: rel(d))
def test_model_volume_is_mounted_read_only_at_the_repository(models, directory):
    _, deployment, pod, container = server(directory)
    repository = flags(container)["model_repository"]
    claims = {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    mounts = [m for m in container["volumeMounts"] if m["mountPath"] == repository]
    assert len(mounts) == 1, f"nothing mounted at --model_repository={repository}"
    mount = mounts[0]
    assert mount["name"] in claims, "the repository must come from a PersistentVolumeClaim"
    assert mount.get("readOnly") is True and claims[mount["name"]].get("readOnly") is True
    assert not mount.get("subPath")
    pvc = find(render(models), "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == claims[mount["name"]]["claimName"]
    assert "ReadOnlyMany" in pvc["spec"]["accessModes"]
    # The fill Job writes that claim, from the image the server runs.
    job = find(render(models), "Job")
    job_pod = job["spec"]["template"]["spec"]
    job_claims = [v["persistentVolumeClaim"]["claimName"] for v in job_pod["volumes"] if "persistentVolumeClaim" in v]
    assert job_claims == [pvc["metadata"]["name"]]
    fill = job_pod["containers"][0]
    assert fill["image"] == container["image"]
    target = next(m["mountPath"] for m in fill["volumeMounts"])
    script = " ".join(fill.get("command", []) + fill.get("args", []))
    assert f"/models/. {target}/" in script, "the Job copies the image's /models into the claim"
    sc = security(job_pod, fill)
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == UID and sc["allowPrivilegeEscalation"] is False
    assert "ALL" in sc["capabilities"]["drop"] and sc["readOnlyRootFilesystem"] is True


def test_gpu_model_volume_asks_for_gpu_instances():
    job = find(render(MODELS_GPU), "Job")
    env = {e["name"]: e.get("value", "") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    group = env["INSTANCE_GROUP"]
    assert re.fullmatch(r"instance_group \{ kind: KIND_(AUTO|GPU)( count: [1-9][0-9]*)? \}", group), group
    cpu_job = find(render(MODELS), "Job")
    cpu_env = {e["name"]: e.get("value", "") for e in cpu_job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert cpu_env["INSTANCE_GROUP"] == "", "CPU models keep --instances (no instance_group)"


def test_fill_job_adds_the_instance_group_only_where_a_config_has_none(tmp_path):
    """Runs the fill Job's script with /bin/sh over a stand-in for the image's /models."""
    job = find(render(MODELS_GPU), "Job")
    fill = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in fill["env"]}
    models, repository = tmp_path / "models", tmp_path / "repository"
    for name in ("tuned", "grouped", "inline", "bare", "lost+found"):
        (models / name).mkdir(parents=True)
    tuned = "# written by the tuner\nmax_batch_size: 8"  # no final newline
    grouped = "max_batch_size: 4\n  instance_group { kind: KIND_CPU count: 2 }\n"
    inline = "max_batch_size: 4 instance_group [ { kind: KIND_CPU } ]\n"
    for name, text in (("tuned", tuned), ("grouped", grouped), ("inline", inline)):
        (models / name / "config.pbtxt").write_text(text)
    repository.mkdir()
    script = fill["args"][0].replace("/models/", f"{models}/").replace("/repository", str(repository))
    for _ in range(2):  # a second fill gives the same files
        subprocess.run([*fill["command"], script], env={**os.environ, **env}, check=True,
                       capture_output=True)
        group = "\n" + env["INSTANCE_GROUP"] + "\n"
        assert (repository / "tuned" / "config.pbtxt").read_text() == tuned + group
        assert (repository / "grouped" / "config.pbtxt").read_text() == grouped
        assert (repository / "inline" / "config.pbtxt").read_text() == inline
        assert (repository / "bare" / "config.pbtxt").read_text() == group
        assert not (repository / "lost+found" / "config.pbtxt").exists()


def gpu_mentions(objects):
    return "nvidia.com/gpu" in yaml.safe_dump(objects)


def test_only_the_gpu_overlay_asks_for_a_gpu():
    _, _, pod, container = server(OVERLAY_GPU)
    limits = container["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) >= 1
    assert any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
    assert pod.get("nodeSelector"), "GPU pods should land on GPU nodes"
    for directory in (BASE, OVERLAY_CPU):
        assert not gpu_mentions(render(directory)), f"{rel(directory)} mentions nvidia.com/gpu"
    cpu_image = server(OVERLAY_CPU)[3]["image"]
    assert container["image"] != cpu_image and container["image"].split(":")[0] == cpu_image.split(":")[0]


@overlays
def test_autoscaler_metrics_and_target(directory):
    objects, deployment, _, container = server(directory)
    hpa = find(objects, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": deployment["metadata"]["name"]}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    metrics = hpa["spec"]["metrics"]
    cpu = [m for m in metrics if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
    assert cpu and cpu[0]["resource"]["target"]["type"] == "Utilization"
    pods = [m for m in metrics if m["type"] == "Pods"]
    assert len(pods) == 1
    target = pods[0]["pods"]["target"]
    assert target["type"] == "AverageValue"
    # Scale out well before a pod's queue is full and refuses requests.
    assert float(target["averageValue"]) < int(flags(container)["max_queue_size"])


@overlays
def test_autoscaler_metric_is_what_the_adapter_exposes(directory):
    objects, _, _, _ = server(directory)
    hpa = find(objects, "HorizontalPodAutoscaler")
    wanted = next(m for m in hpa["spec"]["metrics"] if m["type"] == "Pods")["pods"]["metric"]["name"]
    for source, rules in adapter_rules().items():
        exposed = {}
        for rule in rules:
            metric = series_metric(rule["seriesQuery"])
            name = exposed_name(rule, metric)
            if name:
                exposed[name] = (metric, rule)
        assert wanted in exposed, f"the adapter's {source} exposes {sorted(exposed)}, not {wanted}"
        metric, rule = exposed[wanted]
        assert metric == "gatescope_pending_requests"
        assert metric in documented_metrics(), f"{metric} is not in docs/metrics.md"
        overrides = rule["resources"]["overrides"]
        assert overrides["pod"]["resource"] == "pod" and overrides["namespace"]["resource"] == "namespace"
        assert "<<.Series>>" in rule["metricsQuery"] and "<<.LabelMatchers>>" in rule["metricsQuery"]
        assert "<<.GroupBy>>" in rule["metricsQuery"]


def test_adapter_configmap_and_helm_values_agree():
    rules = adapter_rules()
    assert rules["configmap"] and rules["configmap"] == rules["values"]


def test_exposed_name_and_series_metric_read_rules_correctly():
    rule = {"name": {"matches": "^(.*)_total$", "as": "${1}_per_second"}}
    assert exposed_name(rule, "http_requests_total") == "http_requests_per_second"
    assert exposed_name(rule, "gatescope_pending_requests") is None
    assert series_metric('gatescope_pending_requests{pod!=""}') == "gatescope_pending_requests"
    assert series_metric('{__name__="x_y",pod!=""}') == "x_y"
    assert "gatescope_pending_requests" in documented_metrics()
    assert "gatescope_no_such_metric" not in documented_metrics()


@overlays
def test_disruption_budget_and_spreading(directory):
    objects, deployment, pod, _ = server(directory)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    pdb = find(objects, "PodDisruptionBudget")
    assert all(labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
    hpa = find(objects, "HorizontalPodAutoscaler")
    if "minAvailable" in pdb["spec"]:
        assert int(pdb["spec"]["minAvailable"]) < hpa["spec"]["minReplicas"], "a drain could never proceed"
    else:
        assert int(pdb["spec"]["maxUnavailable"]) >= 1
    spread = pod["topologySpreadConstraints"]
    keys = {c["topologyKey"] for c in spread}
    assert {"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys
    for c in spread:
        assert all(labels.get(k) == v for k, v in c["labelSelector"]["matchLabels"].items())


def test_adapter_kustomization_is_the_configmap():
    objects = render(ADAPTER)
    assert [o["kind"] for o in objects] == ["ConfigMap"]
    assert "config.yaml" in objects[0]["data"]
