"""Pure parts of the local control plane: build errors, fake node objects, taint syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from berthmaster.devcluster import build
from berthmaster.devcluster.nodes import fake_node, parse_taint


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


@pytest.mark.parametrize(("text", "taint"), [
    ("key1=value1:NoSchedule", {"key": "key1", "value": "value1", "effect": "NoSchedule"}),
    ("dedicated:NoExecute", {"key": "dedicated", "effect": "NoExecute"}),
])
def test_parse_taint(text: str, taint: dict[str, str]) -> None:
    assert parse_taint(text) == taint


@pytest.mark.parametrize("text", ["key1=value1", "key1=value1:Sometimes"])
def test_parse_taint_rejects_bad_effects(text: str) -> None:
    with pytest.raises(ValueError, match="expected key"):
        parse_taint(text)
