"""(a) Every kustomization under deploy/ renders with `kubectl kustomize`, and the ones a
user applies hold what docs/kubernetes.md says they do."""
import pytest

from deploy_manifests import (BASE, MODELS, MODELS_GPU, OVERLAY_CPU, OVERLAY_GPU, KSERVE, ADAPTER,
                              kubectl, kustomization_dirs, rel, render)

SERVER_KINDS = sorted(["Deployment", "Service", "Service", "PodDisruptionBudget",
                       "HorizontalPodAutoscaler"])


def test_kubectl_kustomize_is_available_and_new_enough():
    assert kubectl()


def test_the_documented_kustomizations_exist():
    found = set(kustomization_dirs())
    for directory in (BASE, OVERLAY_CPU, OVERLAY_GPU, MODELS, MODELS_GPU, KSERVE, ADAPTER):
        assert directory in found, f"{rel(directory)} has no kustomization.yaml"


@pytest.mark.parametrize("directory", kustomization_dirs(), ids=rel)
def test_kustomization_renders(directory):
    objects = render(directory)
    assert objects, f"{rel(directory)} renders nothing"
    for o in objects:
        assert o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"), o


@pytest.mark.parametrize("directory", [BASE, OVERLAY_CPU, OVERLAY_GPU], ids=rel)
def test_server_kustomizations_hold_the_server(directory):
    assert sorted(o["kind"] for o in render(directory)) == SERVER_KINDS


@pytest.mark.parametrize("directory", [MODELS, MODELS_GPU], ids=rel)
def test_model_kustomizations_hold_the_volume_and_its_fill_job(directory):
    assert sorted(o["kind"] for o in render(directory)) == ["Job", "PersistentVolumeClaim"]


def test_overlays_change_the_base():
    base, cpu, gpu = (render(d) for d in (BASE, OVERLAY_CPU, OVERLAY_GPU))
    assert base != cpu and base != gpu and cpu != gpu
