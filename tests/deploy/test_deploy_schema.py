"""(b) Every manifest under deploy/ validates against a Kubernetes API schema (validate.mjs:
kubernetes-models' JSON schemas plus a TypeScript check of field names against the same
packages' types; prometheus-operator's for ServiceMonitor/PrometheusRule; for KServe and the
prometheus-adapter configuration, the schemas in tests/deploy/schemas). Sources: the rendered
output of every kustomization, and every YAML file on its own except kustomizations and the
patches they apply (partial objects, checked as rendered)."""
import functools
import json

import pytest
import yaml

from deploy_manifests import (ADAPTER, HERE, KUSTOMIZATION_NAMES, NON_OBJECT_YAML, kustomization_dirs,
                              non_object_rule, patch_files, rel, render, validate, yaml_files)

VALIDATOR_SCHEMAS = {"prometheus-adapter-config", "prometheus-adapter-helm-values"}


def standalone_files():
    patches = patch_files()
    return [p for p in yaml_files() if p.name not in KUSTOMIZATION_NAMES and p.resolve() not in patches]


SOURCES = [("kustomize", d) for d in kustomization_dirs()] + [("file", f) for f in standalone_files()]


def source_id(source):
    how, path = source
    return f"{rel(path)}{' (rendered)' if how == 'kustomize' else ''}"


def items_of(source):
    """(items for validate.mjs, documents checked elsewhere) of one source."""
    how, path = source
    items, elsewhere = [], []
    if how == "kustomize":
        docs = render(path)
    else:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for i, doc in enumerate(docs):
        label = f"{source_id(source)} #{i}"
        if isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"):
            items.append({"id": f"{label} {doc['kind']}/{doc.get('metadata', {}).get('name')}", "doc": doc})
            if doc["kind"] == "ConfigMap" and path.resolve().is_relative_to(ADAPTER.resolve()):
                for key, text in (doc.get("data") or {}).items():
                    items.append({"id": f"{label} data[{key}]", "schema": "prometheus-adapter-config",
                                  "doc": yaml.safe_load(text)})
            continue
        rule = non_object_rule(path)
        assert rule, (f"{label} is not a Kubernetes object (no apiVersion/kind) and "
                      f"NON_OBJECT_YAML in tests/deploy/deploy_manifests.py does not say what checks it")
        if rule in VALIDATOR_SCHEMAS:
            items.append({"id": label, "schema": rule, "doc": doc})
        else:
            elsewhere.append(label)
    return items, elsewhere


@functools.lru_cache(maxsize=None)
def all_results():
    items = [item for source in SOURCES for item in items_of(source)[0]]
    return validate(items)


@pytest.mark.parametrize("source", SOURCES, ids=source_id)
def test_manifests_validate(source):
    items, elsewhere = items_of(source)
    assert items or elsewhere, f"{source_id(source)} holds no document"
    results = all_results()
    failures = {i["id"]: results[i["id"]]["errors"] for i in items if results[i["id"]]["errors"]}
    assert not failures, json.dumps(failures, indent=2)
    for i in items:
        assert results[i["id"]]["schema"] not in (None, "none"), i["id"]


def test_known_kinds_have_their_schema():
    schemas = {r["id"].split(" ")[-1].split("/")[0]: r["schema"] for r in all_results().values()}
    assert schemas["ServiceMonitor"].startswith("@kubernetes-models/prometheus-operator/")
    assert schemas["PrometheusRule"].startswith("@kubernetes-models/prometheus-operator/")
    assert schemas["Deployment"] == "kubernetes-models/apps/v1/Deployment"
    assert schemas["HorizontalPodAutoscaler"] == "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler"
    assert "kserve.ts" in schemas["ServingRuntime"] and "kserve.ts" in schemas["InferenceService"]


def container(**extra):
    return {"name": "server", "image": "gatescope:latest", **extra}


def deployment(pod_spec):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec}}}


BROKEN = {
    # Field names only TypeScript's excess-property check catches (the API schema allows them).
    "misspelt probe": (deployment({"containers": [container(readinesProbe={"grpc": {"port": 8001}})]}),
                       "readinesProbe"),
    "capabilities on the pod": (deployment({"securityContext": {"capabilities": {"drop": ["ALL"]}},
                                            "containers": [container()]}), "capabilities"),
    # Types and required fields: both halves.
    "port as a string": (deployment({"containers": [container(ports=[{"containerPort": "8001"}])]}),
                         ("schema: /spec/template/spec/containers/0/ports/0/containerPort", "type: Type 'string'")),
    "container without a name": (deployment({"containers": [{"image": "x"}]}), "name"),
    "enum": (deployment({"containers": [container(imagePullPolicy="Sometimes")]}), "imagePullPolicy"),
    "hpa metric type": ({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                         "metadata": {"name": "x"},
                         "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 2,
                                  "metrics": [{"type": "Pods", "pods": {"metric": {"name": "m"},
                                                                        "target": {"type": "AverageValue",
                                                                                   "averageValu": "4"}}}]}},
                        "averageValu"),
    "no schema": ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}}, "no schema"),
    "servicemonitor": ({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                        "metadata": {"name": "x"},
                        "spec": {"selector": {}, "endpoints": [{"port": "metrics", "intervl": "15s"}]}},
                       "intervl"),
    "servingruntime format": ({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
                               "metadata": {"name": "x"},
                               "spec": {"supportedModelFormat": [{"name": "gatescope"}],
                                        "containers": [container()]}}, "supportedModelFormat"),
    "servingruntime container": ({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
                                  "metadata": {"name": "x"},
                                  "spec": {"containers": [container(ports=[{"containerPort": 8001.5}])]}},
                                 "schema: /spec/containers/0/ports/0/containerPort must be integer"),
    "servingruntime protocol": ({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
                                 "metadata": {"name": "x"},
                                 "spec": {"protocolVersions": ["grpc-v3"], "containers": [container()]}},
                                "grpc-v3"),
    "inferenceservice without a format": ({"apiVersion": "serving.kserve.io/v1beta1",
                                           "kind": "InferenceService", "metadata": {"name": "x"},
                                           "spec": {"predictor": {"model": {"runtime": "gatescope",
                                                                            "storageUri": "pvc://m"}}}},
                                          "modelFormat"),
    "inferenceservice pod field": ({"apiVersion": "serving.kserve.io/v1beta1",
                                    "kind": "InferenceService", "metadata": {"name": "x"},
                                    "spec": {"predictor": {"terminationGracePeriodSeconds": "35",
                                                           "model": {"modelFormat": {"name": "g"}}}}},
                                   ("schema: /spec/predictor/terminationGracePeriodSeconds", "type: Type 'string'")),
}


def test_validator_rejects_broken_manifests():
    items = [{"id": name, "doc": doc} for name, (doc, _) in BROKEN.items()]
    items.append({"id": "adapter rule", "schema": "prometheus-adapter-config",
                  "doc": {"rules": [{"seriesQuery": "x{pod!=\"\"}", "name": {"as": "y"}}]}})
    results = validate(items)
    for name, (_, needles) in BROKEN.items():
        errors = results[name]["errors"]
        for needle in [needles] if isinstance(needles, str) else needles:
            assert any(needle in e for e in errors), f"{name}: expected an error with {needle!r}, got {errors}"
    assert any("metricsQuery" in e for e in results["adapter rule"]["errors"])


def test_validator_packages_are_pinned_and_ignored():
    package = json.loads((HERE / "package.json").read_text())
    for name, version in package["dependencies"].items():
        assert version[0].isdigit(), f"{name}@{version} is not an exact version"
    lock = json.loads((HERE / "package-lock.json").read_text())
    for name, version in package["dependencies"].items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
    assert "node_modules/" in (HERE / ".gitignore").read_text().split()


def test_non_object_yaml_rules_are_used():
    files = [p for p in standalone_files() if non_object_rule(p)]
    for pattern in NON_OBJECT_YAML:
        assert any(non_object_rule(p) == NON_OBJECT_YAML[pattern] for p in files), \
            f"NON_OBJECT_YAML entry {pattern} matches no file; remove it"
