"""Template nodes: what a new replica of a MachineSet looks like."""

from __future__ import annotations

import pytest

from berthmaster.operator.autoscaler.template import TemplateError, template_node
from tests.unit.autoscaler.builders import make_machine_set, make_node


def test_capacity_labels_taints_from_the_machine_template() -> None:
    node = template_node(make_machine_set("w", cpu="8", memory="32Gi", labels={"role": "w"},
                                          taints=[{"key": "k", "effect": "NoSchedule"}]))
    assert node["status"]["allocatable"]["cpu"] == "8"
    assert node["status"]["allocatable"]["memory"] == "32Gi"
    assert node["metadata"]["labels"]["role"] == "w"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]
    assert node["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]


def test_kwok_provider_shape_with_its_defaults() -> None:
    machine_set = make_machine_set("w")
    machine_set["spec"]["template"]["spec"]["providerSpec"]["value"] = {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "KwokMachineProviderSpec",
        "zone": "z1", "capacity": {"cpu": "2"}}
    node = template_node(machine_set)
    assert node["status"]["capacity"]["cpu"] == "2"
    assert node["status"]["capacity"]["memory"] == "16Gi"  # the kwok provider's default
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z1"


def test_upstream_capacity_annotations_win() -> None:
    prefix = "capacity.cluster-autoscaler.kubernetes.io/"
    node = template_node(make_machine_set("w", annotations={
        prefix + "cpu": "16", prefix + "memory": "128G", prefix + "maxPods": "200",
        prefix + "ephemeral-disk": "100Gi", prefix + "gpu-type": "nvidia.com/gpu",
        prefix + "gpu-count": "2", prefix + "labels": "a=1,b=2",
        prefix + "taints": "gpu=true:NoSchedule"}))
    capacity = node["status"]["capacity"]
    assert (capacity["cpu"], capacity["memory"], capacity["pods"], capacity["ephemeral-storage"],
            capacity["nvidia.com/gpu"]) == ("16", "128G", "200", "100Gi", "2")
    assert node["metadata"]["labels"]["a"] == "1"
    assert {"key": "gpu", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]


def test_openshift_machine_annotations() -> None:
    node = template_node(make_machine_set("w", annotations={
        "machine.openshift.io/vCPU": "4", "machine.openshift.io/memoryMb": "16384",
        "machine.openshift.io/GPU": "1"}))
    assert node["status"]["capacity"]["memory"] == "16384Mi"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "1"


def test_registered_node_is_the_fallback() -> None:
    machine_set = make_machine_set("w")
    del machine_set["spec"]["template"]["spec"]["providerSpec"]
    node = template_node(machine_set, make_node("w-1", cpu="6", labels={"x": "y"}))
    assert node["status"]["allocatable"]["cpu"] == "6"
    assert node["metadata"]["labels"]["x"] == "y"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] != "w-1"


def test_unknown_capacity_names_the_fix() -> None:
    machine_set = make_machine_set("w")
    del machine_set["spec"]["template"]["spec"]["providerSpec"]
    with pytest.raises(TemplateError, match=r"capacity\.cluster-autoscaler\.kubernetes\.io/cpu"):
        template_node(machine_set)


def test_bad_taint_annotation_names_the_format() -> None:
    with pytest.raises(TemplateError, match="key=value:Effect"):
        template_node(make_machine_set("w", annotations={
            "capacity.cluster-autoscaler.kubernetes.io/taints": "gpu=true"}))
