"""Helpers for tests/deploy: render kustomizations, collect every manifest under deploy/,
run the schema validator (validate.mjs), and read server flags out of container args.

The tools are preconditions, not options: a missing kubectl or node, or a tests/deploy
without node_modules, fails the tests that need them with the command that fixes it (CI
installs them: scripts/setup.sh)."""
from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
KSERVE = DEPLOY / "kserve"
ADAPTER = K8S / "prometheus-adapter"
METRICS_DOC = REPO / "docs" / "metrics.md"

# The kustomizations a user applies, and what each must contain.
BASE = K8S / "base"
OVERLAY_CPU = K8S / "overlays" / "cpu"
OVERLAY_GPU = K8S / "overlays" / "gpu"
MODELS = K8S / "models"
MODELS_GPU = K8S / "overlays" / "gpu" / "models"
SERVER_KUSTOMIZATIONS = [BASE, OVERLAY_CPU, OVERLAY_GPU]

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

# YAML files under deploy/ that are not Kubernetes objects, and what checks them. A new
# YAML file without apiVersion/kind must be added here (test_deploy_schema fails until it is).
NON_OBJECT_YAML = {
    "deploy/kubernetes/prometheus-adapter/values.yaml":
        "prometheus-adapter-helm-values",  # validate.mjs schema
    "deploy/monitoring/tests/*.yaml":
        "promtool rule unit tests (tests/deploy/test_monitoring*.py runs promtool)",
}

SHUTDOWN_MARGIN_S = 5  # seconds left after preStop + drain_seconds for the process to exit
UID = GID = 10001      # the image's user

MIN_KUSTOMIZE_MAJOR = 5  # checked with kustomize v5.0.1 (kubectl 1.27) and v5.5.0 (kubectl 1.32)
NODE_INSTALL = "npm ci --prefix tests/deploy --no-audit --no-fund"


def rel(path: Path) -> str:
    return str(Path(path).resolve().relative_to(REPO))


# ---- tools ---------------------------------------------------------------------------------

def require_tool(name: str, install: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.fail(f"`{name}` is not on PATH; install it ({install}). These tests never skip.")
    return path


@functools.lru_cache(maxsize=None)
def kubectl() -> str:
    path = require_tool("kubectl", "scripts/setup.sh; any kubectl >= 1.27 (kustomize v5)")
    version = kustomize_version(path)
    if version[0] < MIN_KUSTOMIZE_MAJOR:
        pytest.fail(f"{path}'s kustomize is v{'.'.join(map(str, version))}; deploy/ needs kustomize "
                    f">= v{MIN_KUSTOMIZE_MAJOR} (kubectl >= 1.27)")
    return path


def kustomize_version(path: str) -> tuple[int, ...]:
    out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True,
                         text=True, timeout=60)
    if out.returncode != 0:
        pytest.fail(f"`{path} version --client` failed: {out.stderr.strip()}")
    info = json.loads(out.stdout)
    text = info.get("kustomizeVersion", "")
    if not text:
        # kubectl < 1.24 does not print it: 1.14-1.20 embed kustomize v2.0.3, 1.21-1.23 v4.
        minor = int(re.sub(r"\D", "", info.get("clientVersion", {}).get("minor", "0")) or 0)
        text = "v2.0.3" if minor <= 20 else "v4.0.0"
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        pytest.fail(f"cannot read kustomize's version from `kubectl version`: {text!r}")
    return tuple(int(g) for g in match.groups())


@functools.lru_cache(maxsize=None)
def node() -> str:
    path = require_tool("node", "Node.js >= 20")
    if not (HERE / "node_modules" / "kubernetes-models").is_dir():
        pytest.fail(f"tests/deploy/node_modules is missing; run `{NODE_INSTALL}`")
    return path


# ---- kustomize ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def render_text(directory: Path) -> str:
    out = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise AssertionError(f"kubectl kustomize {rel(directory)} failed:\n{out.stderr}")
    return out.stdout


def render(directory: Path) -> list[dict]:
    """The objects `kubectl kustomize directory` prints (fresh copies)."""
    return [d for d in yaml.safe_load_all(render_text(Path(directory))) if d]


def find(objects: list[dict], kind: str, name: str | None = None) -> dict:
    hits = [o for o in objects if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def kustomization_dirs() -> list[Path]:
    return sorted({p.parent for name in KUSTOMIZATION_NAMES for p in DEPLOY.rglob(name)
                   if "node_modules" not in p.parts})


def kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_NAMES:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(directory)


def patch_files() -> set[Path]:
    """Files that kustomizations use as patches: partial objects, checked only as rendered."""
    found = set()
    for directory in kustomization_dirs():
        k = yaml.safe_load(kustomization_file(directory).read_text()) or {}
        paths = list(k.get("patchesStrategicMerge") or [])
        paths += [p.get("path") for p in (k.get("patches") or []) + (k.get("patchesJson6902") or [])]
        found |= {(directory / p).resolve() for p in paths if isinstance(p, str)}
    return found


def yaml_files() -> list[Path]:
    return sorted(p for pattern in ("*.yaml", "*.yml") for p in DEPLOY.rglob(pattern)
                  if "node_modules" not in p.parts)


def non_object_rule(path: Path) -> str | None:
    from fnmatch import fnmatch
    r = rel(path)
    return next((what for pattern, what in NON_OBJECT_YAML.items() if fnmatch(r, pattern)), None)


# ---- the validator -------------------------------------------------------------------------

def validate(items: list[dict]) -> dict:
    """Runs validate.mjs on [{"id", "doc", "schema"?}]; returns {id: result}."""
    out = subprocess.run([node(), str(HERE / "validate.mjs")], input=json.dumps({"items": items}),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(f"validate.mjs failed ({out.returncode}):\n{out.stderr}")
    results = json.loads(out.stdout)["results"]
    assert [r["id"] for r in results] == [i["id"] for i in items]
    return {r["id"]: r for r in results}


# ---- reading the server's configuration out of a container ------------------------------

def flags(container: dict) -> dict[str, str]:
    """--name=value arguments of a container (the image's entrypoint is gatescope-server)."""
    result = {}
    for arg in container.get("args") or []:
        match = re.fullmatch(r"--([a-z_]+)=(.*)", arg)
        assert match, f"argument {arg!r} is not --name=value"
        result[match.group(1)] = match.group(2)
    return result


def cpu_cores(quantity) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def prestop_seconds(container: dict) -> int:
    """Seconds the preStop hook waits: a `sleep` handler, or an exec of sleep N."""
    pre = ((container.get("lifecycle") or {}).get("preStop")) or {}
    if "sleep" in pre:
        return int(pre["sleep"]["seconds"])
    command = (pre.get("exec") or {}).get("command") or []
    words = " ".join(command).split()
    for i, word in enumerate(words[:-1]):
        if word.endswith("sleep"):
            return int(words[i + 1])
    raise AssertionError(f"container {container['name']} has no preStop sleep")


def security(pod_spec: dict, container: dict) -> dict:
    """The container's effective security settings (its own over the pod's)."""
    pod = pod_spec.get("securityContext") or {}
    own = container.get("securityContext") or {}
    merged = {k: pod[k] for k in ("runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile") if k in pod}
    merged.update(own)
    return merged


def probes(container: dict) -> dict[str, dict]:
    return {k: container[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in container}


def probe_port(probe: dict):
    for handler in ("grpc", "tcpSocket", "httpGet"):
        if handler in probe:
            return handler, probe[handler]["port"]
    raise AssertionError(f"probe without a port: {probe}")


def documented_metrics() -> set[str]:
    """Metric names in the table of docs/metrics.md."""
    names = set()
    for line in METRICS_DOC.read_text().splitlines():
        match = re.match(r"\|\s*`([a-z_:]+)(?:\{[^}]*\})?`\s*\|", line)
        if match:
            names.add(match.group(1))
    return names


def adapter_rules() -> dict[str, list[dict]]:
    """The adapter's custom-metrics rules, from the ConfigMap and from the Helm values."""
    cm = find(render(ADAPTER), "ConfigMap")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    values = yaml.safe_load((ADAPTER / "values.yaml").read_text())
    return {"configmap": config.get("rules") or [], "values": values["rules"]["custom"]}


def exposed_name(rule: dict, series: str) -> str | None:
    """The custom metric name a rule gives `series` (name.matches / name.as, Go regexp syntax
    limited to what Python's re reads the same way), or None if it does not match."""
    name = rule.get("name") or {}
    pattern = name.get("matches", "(.*)")
    match = re.search(pattern, series)
    if not match:
        return None
    template = name.get("as") or ("${1}" if match.groups() else "${0}")
    return re.sub(r"\$\{(\d+)\}|\$(\d+)", lambda m: match.group(int(m.group(1) or m.group(2))), template)


def series_metric(series_query: str) -> str:
    """The metric name a seriesQuery selects: name{...} or {__name__="name", ...}."""
    match = re.match(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{|$)", series_query)
    if match:
        return match.group(1)
    match = re.search(r'__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"', series_query)
    assert match, f"cannot tell which metric {series_query!r} selects (use name{{...}} or __name__=\"...\")"
    return match.group(1)


def check_security(pod, container):
    sc = security(pod, container)
    assert sc.get("runAsNonRoot") is True
    assert sc.get("runAsUser") == UID and sc.get("runAsGroup") == GID
    assert sc.get("allowPrivilegeEscalation") is False
    assert sc.get("readOnlyRootFilesystem") is True
    assert "ALL" in sc.get("capabilities", {}).get("drop", [])
    assert not sc.get("capabilities", {}).get("add")
    assert sc.get("seccompProfile", {}).get("type") == "RuntimeDefault"
    assert not sc.get("privileged")
    # A read-only root needs writable scratch: /tmp from an emptyDir.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    tmp = [m for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
    assert tmp and "emptyDir" in volumes[tmp[0]["name"]], "no writable /tmp"
