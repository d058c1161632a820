"""Node conformance (labels, link annotation, additive taints) and the kwok provider's Node."""

from __future__ import annotations

import pytest

from berthmaster.operator.machines.api import NODE_MACHINE
from berthmaster.operator.machines.nodes import missing_taints, node_patch, wanted_labels
from berthmaster.operator.machines.providers import (
    InvalidProviderSpec,
    provider_for,
    unknown_instance_state,
)
from berthmaster.operator.machines.providers.kwok import build_node, instance_of, validate
from tests.unit.operator.machines.machine_builders import make_machine


def kwok_machine(**value: object) -> dict:
    machine = make_machine("worker-1")
    machine["spec"]["providerSpec"] = {"value": {"apiVersion": "berthmaster.io/v1alpha1",
                                                 "kind": "KwokMachineProviderSpec", **value}}
    machine["spec"]["taints"] = [{"key": "key1", "value": "value1", "effect": "NoExecute"}]
    machine["spec"]["metadata"] = {"labels": {"role": "worker"}}
    return machine


def test_missing_taints_match_on_key_and_effect() -> None:
    current = [{"key": "a", "value": "1", "effect": "NoSchedule"}]
    wanted = [{"key": "a", "value": "2", "effect": "NoSchedule"},
              {"key": "a", "effect": "NoExecute"}]
    assert missing_taints(current, wanted) == [{"key": "a", "effect": "NoExecute"}]


def test_node_patch_adds_never_removes() -> None:
    machine = kwok_machine()
    node = {"metadata": {"name": "worker-1", "labels": {"role": "worker"}, "annotations": {}},
            "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}}
    patch = node_patch(node, machine)
    assert patch == {
        "metadata": {"annotations": {"machine.openshift.io/machine": "ns/worker-1"},
                     "labels": {"machine.openshift.io/machine": "worker-1"}},
        "spec": {"taints": [{"key": "other", "effect": "NoSchedule"},
                            {"key": "key1", "value": "value1", "effect": "NoExecute"}]}}
    conforming = {"metadata": {"labels": {"role": "worker",
                                          "machine.openshift.io/machine": "worker-1"},
                               "annotations": {"machine.openshift.io/machine": "ns/worker-1"}},
                  "spec": {"taints": patch["spec"]["taints"]}}
    assert node_patch(conforming, machine) is None


def test_kwok_node_carries_machine_shape() -> None:
    node = build_node(kwok_machine(instanceType="m5.large", zone="us-east-1a",
                                   capacity={"cpu": "8", "example.com/gpu": "2"},
                                   labels={"pool": "a"}))
    meta = node["metadata"]
    assert meta["name"] == "worker-1"
    assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert meta["annotations"]["machine.openshift.io/machine"] == "ns/worker-1"
    assert {"role": "worker", "pool": "a", "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "us-east-1a"}.items() <= meta["labels"].items()
    assert node["spec"] == {"providerID": "kwok://ns/worker-1",
                            "taints": [{"key": "key1", "value": "value1", "effect": "NoExecute"}]}
    assert node["status"]["capacity"]["cpu"] == "8"
    assert node["status"]["allocatable"]["example.com/gpu"] == "2"
    assert node["status"]["capacity"]["memory"] == "16Gi"


def test_instance_is_only_a_node_with_our_provider_id() -> None:
    machine = kwok_machine()
    node = build_node(machine)
    instance = instance_of(node, machine)
    assert instance is not None and instance.provider_id == "kwok://ns/worker-1"
    assert instance.machine_labels == {}
    typed = kwok_machine(instanceType="m5.large", region="r1", zone="r1a")
    assert instance_of(build_node(typed), typed).machine_labels == {  # type: ignore[union-attr]
        "machine.openshift.io/instance-type": "m5.large", "machine.openshift.io/region": "r1",
        "machine.openshift.io/zone": "r1a"}
    node["spec"]["providerID"] = "kwok://elsewhere/worker-1"
    assert instance_of(node, machine) is None


def test_kwok_validation_names_field_and_fix() -> None:
    assert validate(kwok_machine(capacity={"cpu": "4", "memory": "16Gi"})) == []
    problems = validate(kwok_machine(capacity={"cpu": "four"}, colour="red"))
    assert problems == [
        "Machine worker-1: spec.providerSpec.value: unknown field(s) colour; "
        "KwokMachineProviderSpec accepts apiVersion, capacity, instanceType, kind, labels, "
        "metadata, region, zone",
        "Machine worker-1: spec.providerSpec.value.capacity.cpu: 'four' is not a quantity; "
        "write it like 4, 500m, 16Gi or 1e3"]


def test_provider_for_names_supported_kinds() -> None:
    providers = {"KwokMachineProviderSpec": object()}
    machine = kwok_machine()
    assert provider_for(machine, providers) is providers["KwokMachineProviderSpec"]  # type: ignore[arg-type]
    machine["spec"]["providerSpec"]["value"]["kind"] = "AWSMachineProviderConfig"
    with pytest.raises(InvalidProviderSpec, match="'AWSMachineProviderConfig' is not supported "
                                                  "by berthmaster; use one of: "
                                                  "KwokMachineProviderSpec"):
        provider_for(machine, providers)  # type: ignore[arg-type]


@pytest.mark.parametrize(("provider_status", "failed"), [
    (None, None),
    ({}, None),
    ({"instanceId": "i-1"}, None),                                  # no state recorded
    ({"instanceId": "i-1", "instanceState": "running"},
     {"instanceId": "i-1", "instanceState": "Unknown"}),           # AWS, GCP, vSphere
    ({"vmState": "Succeeded"}, {"vmState": "Unknown"}),            # Azure
    ({"instanceState": "Unknown"}, None),                           # already so
])
def test_failed_machine_provider_state_becomes_unknown(
        provider_status: dict | None, failed: dict | None) -> None:
    """openshift/machine-api-operator pkg/controller/machine/controller.go,
    overrideFailedMachineProviderStatusState: a Machine going Failed has its providerStatus
    ``instanceState`` / ``vmState`` set to Unknown when one is recorded."""
    assert unknown_instance_state(provider_status) == failed


@pytest.mark.parametrize(("name", "label"), [
    ("worker-1", "worker-1"),
    ("w" * 63, "w" * 63),
    # a valid Machine name that is no valid label value: the label is still there (empty), so
    # the operator's server-side Node watch (api.NODES_WATCH_SELECTOR) still sees this Node
    ("w" * 64, ""),
    ("a.b-" + "c" * 70, ""),
])
def test_every_linked_node_carries_the_machine_label(name: str, label: str) -> None:
    machine = make_machine(name)
    assert wanted_labels(machine)[NODE_MACHINE] == label
    patch = node_patch({"metadata": {"name": "n", "labels": {}, "annotations": {}},
                        "spec": {}}, machine)
    assert patch is not None and patch["metadata"]["labels"][NODE_MACHINE] == label
    assert build_node(kwok_machine_named(name))["metadata"]["labels"][NODE_MACHINE] == label


def kwok_machine_named(name: str) -> dict:
    machine = make_machine(name)
    machine["spec"]["providerSpec"] = {"value": {"apiVersion": "berthmaster.io/v1alpha1",
                                                 "kind": "KwokMachineProviderSpec"}}
    return machine


def test_node_patch_copies_spec_metadata_annotations_and_keeps_removed_ones() -> None:
    """machine-api-operator pkg/controller/nodelink/nodelink_controller.go ``Reconcile`` sets the
    link annotation, then copies ``spec.metadata.annotations`` (and labels) over the Node's;
    nothing is ever removed from the Node."""
    machine = kwok_machine()
    machine["spec"]["metadata"]["annotations"] = {"example.com/rack": "r1"}
    node = {"metadata": {"name": "worker-1",
                         "labels": {"role": "worker", "machine.openshift.io/machine": "worker-1"},
                         "annotations": {"machine.openshift.io/machine": "ns/worker-1",
                                         "example.com/rack": "r0", "example.com/old": "x"}},
            "spec": {"taints": [{"key": "key1", "value": "value1", "effect": "NoExecute"}]}}
    assert node_patch(node, machine) == {"metadata": {"annotations": {"example.com/rack": "r1"}}}
    node["metadata"]["annotations"]["example.com/rack"] = "r1"
    assert node_patch(node, machine) is None
