"""Pure parts of the local control plane: build errors, fake node objects, taint syntax."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from berthmaster.tooling.devcluster import build
from berthmaster.tooling.devcluster.nodes import fake_node


def test_missing_go_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BERTHMASTER_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.BuildError, match="Go is not installed"):
        build.build_family(build.FAMILIES[0], say=lambda _: None)


def test_binaries_are_keyed_by_the_wrapper_module(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("BERTHMASTER_CACHE", str(tmp_path))
    path = build.binary_path("kube-apiserver")
    assert path.parent.parent == tmp_path / "bin"
    assert path.parent.name.startswith("kubernetes-")
    assert set(build.missing_binaries()) == set(build.BINARIES)


def test_kwok_stages_file_is_keyed_on_the_folders_it_collects(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("BERTHMASTER_CACHE", str(tmp_path))
    path = build.kwok_stages_path()
    assert path.parent == build.binary_path("kwok").parent
    assert {"pod/chaos", "node/chaos"} <= set(build.KWOK_STAGE_DIRS)
    # A cache written before the chaos stages were collected (kwok-stages.yaml, or the file of
    # any other list of folders) is never mistaken for the current one.
    assert path.name != "kwok-stages.yaml"
    assert path.name != build.kwok_stages_name(("node/fast", "node/heartbeat-with-lease",
                                                "pod/fast"))
    assert path.name == build.kwok_stages_name(list(build.KWOK_STAGE_DIRS))


def test_berthmaster_stage_acts_on_labelled_running_pods_only() -> None:
    (stage,) = list(yaml.safe_load_all(build.berthmaster_stages_path().read_text()))
    assert (stage["apiVersion"], stage["kind"]) == ("kwok.x-k8s.io/v1alpha1", "Stage")
    assert stage["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}
    expressions = stage["spec"]["selector"]["matchExpressions"]
    assert {"key": '.metadata.labels["berthmaster.io/kwok-restarts"]', "operator": "In",
            "values": ["true"]} in expressions
    assert {"key": ".status.phase", "operator": "In", "values": ["Running"]} in expressions
    # Rendered from the pod alone, so a second rendering equals the first and kwok stops.
    assert "Now" not in stage["spec"]["next"]["statusTemplate"]


def test_fake_node_carries_kwok_annotation_zone_and_capacity() -> None:
    node = fake_node("n1", labels={"disktype": "ssd"}, zone="us-east-1a",
                     capacity={"cpu": "2", "nvidia.com/gpu": "1"},
                     taints=[{"key": "dedicated", "value": "groupName", "effect": "NoSchedule"}])
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    labels = node["metadata"]["labels"]
    assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["kubernetes.io/hostname"] == "n1"
    assert node["status"]["allocatable"]["cpu"] == "2"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert node["spec"]["taints"][0]["key"] == "dedicated"



def test_helm_stamps_match_its_wrapper_module() -> None:
    """The helm family's version stamps (helm's Makefile LDFLAGS) name the helm and client-go
    versions hack/helm/go.mod pins, so a bump of one without the other fails here."""
    pinned = dict(line.split()[:2] for line in
                  (build.hack_dir() / "helm" / "go.mod").read_text().splitlines()
                  if line.startswith("\t") and len(line.split()) >= 2)
    assert pinned["helm.sh/helm/v3"] == build.HELM_VERSION
    assert pinned["k8s.io/client-go"] == build.HELM_CLIENT_GO_VERSION
    (helm,) = [family for family in build.FAMILIES if family.name == "helm"]
    minor = build.HELM_CLIENT_GO_VERSION.split(".")[1]
    assert f"helm.sh/helm/v3/internal/version.version={build.HELM_VERSION}" in helm.ldflags
    assert "helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1" in helm.ldflags
    assert f"helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor={minor}" in helm.ldflags


def test_prometheus_is_its_own_cached_family() -> None:
    """Pinned in hack/prometheus/go.mod (module v0.316.0 is Prometheus 3.16.0: its VERSION
    file); built with upstream's ``remove_all_sd`` tag (plugins/plugin_*.go) and its version
    stamped as .promu.yml does; only when asked for."""
    family = build.PROMETHEUS_FAMILY
    assert family.module_dir.name == "prometheus"
    assert (family.module_dir / "go.mod").read_text().count(
        f"github.com/prometheus/prometheus {build.PROMETHEUS_MODULE_VERSION}") == 1
    minor, patch = build.PROMETHEUS_MODULE_VERSION.removeprefix("v0.").split(".")
    assert f"3.{int(minor) - 300}.{patch}" == build.PROMETHEUS_VERSION
    assert {name for name, _ in family.packages} == {"prometheus", "promtool"}
    assert build.binary_path("promtool").parent == build.family_dir(family)
    assert family.tags == "remove_all_sd"
    assert f"version.Version={build.PROMETHEUS_VERSION}" in family.ldflags
    assert family not in build.FAMILIES
