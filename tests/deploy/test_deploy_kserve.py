"""(c) deploy/kserve: the ServingRuntime and the InferenceService that uses it agree with each
other, with KServe's conventions (kserve-container, /mnt/models, a gRPC port named h2c,
grpc-v2) and with the model volume of deploy/kubernetes/models."""
from deploy_manifests import (KSERVE, MODELS, SHUTDOWN_MARGIN_S, UID, check_security, find, flags,
                              prestop_seconds, probe_port, probes, render, security)

KSERVE_MODEL_DIR = "/mnt/models"  # where KServe's storage initializer puts the storageUri


def objects():
    rendered = render(KSERVE)
    return find(rendered, "ServingRuntime"), find(rendered, "InferenceService")


def runtime_container(runtime):
    containers = runtime["spec"]["containers"]
    assert [c["name"] for c in containers] == ["kserve-container"]
    return containers[0]


def test_inference_service_uses_the_runtime_and_its_format():
    runtime, isvc = objects()
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    formats = {f["name"]: f for f in runtime["spec"]["supportedModelFormats"]}
    assert model["modelFormat"]["name"] in formats
    wanted = formats[model["modelFormat"]["name"]]
    assert model["modelFormat"].get("version") == wanted.get("version")
    assert wanted.get("autoSelect") is True
    assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]
    assert runtime["spec"]["protocolVersions"] == ["grpc-v2"], "gatescope serves KServe v2 over gRPC only"
    assert runtime["spec"]["multiModel"] is False


def test_runtime_serves_the_storage_path_on_its_declared_grpc_port():
    runtime, _ = objects()
    container = runtime_container(runtime)
    args = flags(container)
    assert args["model_repository"] == KSERVE_MODEL_DIR
    assert args["host"] == "0.0.0.0"
    first = container["ports"][0]
    assert first["containerPort"] == int(args["grpc_port"])
    assert "h2c" in first["name"] or "grpc" in first["name"], "KServe marks h2c/grpc ports as HTTP/2"
    assert set(probes(container)) == {"startupProbe", "readinessProbe", "livenessProbe"}
    for name, probe in probes(container).items():
        handler, port = probe_port(probe)
        assert (handler, port) == ("grpc", first["containerPort"]), name
    annotations = runtime["spec"]["annotations"]
    assert int(annotations["prometheus.kserve.io/port"]) == int(args["metrics_port"])
    assert annotations["prometheus.kserve.io/path"] == "/metrics"
    resources = container["resources"]
    threads, instances = int(args["torch_threads"]), int(args["instances"])
    assert threads >= 1 and threads * instances <= float(resources["limits"]["cpu"])


def test_grace_period_covers_prestop_and_drain():
    runtime, isvc = objects()
    container = runtime_container(runtime)
    drain = int(flags(container)["drain_seconds"])
    grace = isvc["spec"]["predictor"]["terminationGracePeriodSeconds"]
    assert grace >= prestop_seconds(container) + drain + SHUTDOWN_MARGIN_S


def test_security():
    runtime, isvc = objects()
    container = runtime_container(runtime)
    pod = {"securityContext": isvc["spec"]["predictor"].get("securityContext", {}),
           "volumes": runtime["spec"].get("volumes", [])}
    check_security(pod, container)
    assert security({}, container)["runAsUser"] == UID, "the runtime alone must run as the image's user"


def test_storage_uri_is_the_model_volume():
    _, isvc = objects()
    uri = isvc["spec"]["predictor"]["model"]["storageUri"]
    assert uri.startswith("pvc://")
    claim = uri[len("pvc://"):].split("/")[0]
    assert claim == find(render(MODELS), "PersistentVolumeClaim")["metadata"]["name"]
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] in ("RawDeployment", "Standard")
