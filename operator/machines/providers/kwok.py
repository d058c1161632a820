"""The ``kwok`` provider: a Machine's instance is a kwok-managed fake Node.

providerSpec shape (``spec.providerSpec.value``)::

    apiVersion: berthmaster.io/v1alpha1
    kind: KwokMachineProviderSpec
    instanceType: m5.large          # optional: instance-type labels on Machine and Node
    region: us-east-1               # optional: topology.kubernetes.io/region
    zone: us-east-1a                # optional: topology.kubernetes.io/zone
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}   # optional; defaults shown + 100Gi storage
    labels: {node-role.kubernetes.io/worker: ""}      # optional extra Node labels

The instance is the Node named after the Machine, annotated ``kwok.x-k8s.io/node: fake`` (kwok
keeps such Nodes Ready and runs their pods) and ``machine.openshift.io/machine: <ns>/<name>``,
with ``spec.providerID: kwok://<namespace>/<name>``, the Machine's ``spec.taints``, and the
labels of ``spec.metadata.labels`` and the providerSpec. Creating it again finds it (no second
instance); deleting it again finds it gone (success). Deleting the instance deletes that Node,
as ``kwokctl scale node`` does; the machine controller's later Node deletion then finds it gone,
exactly as upstream's does when a cloud controller removed the Node first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from berthmaster.foundation.keys import key_of
from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.foundation.problems import Problems
from berthmaster.operator.machines.api import (
    INSTANCE_TYPE_LABEL,
    NODE_MACHINE,
    REGION_LABEL,
    ZONE_LABEL,
    node_path,
)
from berthmaster.operator.machines.nodes import label_problems, wanted_labels
from berthmaster.operator.machines.providers import Instance, InvalidProviderSpec
from berthmaster.scheduler.label_string import label_key_problem, label_value_problem

KIND = "KwokMachineProviderSpec"
API_VERSION = "berthmaster.io/v1alpha1"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
DEFAULT_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
FIELDS = {"apiVersion", "kind", "instanceType", "region", "zone", "capacity", "labels",
          "metadata"}
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(
    r"^[+]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")


def provider_spec(machine: dict[str, Any]) -> dict[str, Any]:
    return dict(((machine.get("spec") or {}).get("providerSpec") or {}).get("value") or {})


def provider_id(machine: dict[str, Any]) -> str:
    meta = machine.get("metadata") or {}
    return f"kwok://{meta.get('namespace')}/{meta.get('name')}"


def name_problems(machine: dict[str, Any], problems: Problems) -> None:
    """Whether the Machine's name can name its Node: a DNS-1123 subdomain, and (the Node's
    ``kubernetes.io/hostname`` label carries it) a valid label value, so at most 63
    characters."""
    name = str((machine.get("metadata") or {}).get("name") or "")
    fix = ("give the Machine a shorter name (a MachineSet's Machines are named after it: "
           "<MachineSet name>-<5 characters>, so keep MachineSet names to 57 characters)")
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        problems.add("metadata.name", f"{name!r} is not a valid Node name (a lowercase RFC 1123 "
                     f"subdomain); {fix}")
    elif label_value_problem(name) is not None:
        problems.add("metadata.name", "the Node named after the Machine carries its name in the "
                     "kubernetes.io/hostname label, which must be at most 63 characters (this "
                     f"one is {len(name)}); {fix}")


def node_machine_problems(machine: dict[str, Any], kind: str, fields: set[str]) -> Problems:
    """What every provider whose Node is named after its Machine checks: the Machine's name,
    the labels its Node would carry, and providerSpec fields outside ``fields``."""
    problems = Problems()
    name_problems(machine, problems)
    label_problems(machine, problems)
    unknown = sorted(set(provider_spec(machine)) - fields)
    if unknown:
        problems.add(VALUE, f"unknown field(s) {', '.join(unknown)}; {kind} accepts "
                     f"{', '.join(sorted(fields))}")
    return problems


VALUE = "spec.providerSpec.value"


def validate(machine: dict[str, Any]) -> list[str]:
    """Every problem with a kwok Machine (its name, the labels its Node would carry, its
    providerSpec), each naming the field and the fix."""
    name = (machine.get("metadata") or {}).get("name")
    where = VALUE
    value = provider_spec(machine)
    problems = node_machine_problems(machine, KIND, FIELDS)
    capacity = value.get("capacity") or {}
    if not isinstance(capacity, dict):
        problems.add(f"{where}.capacity", "must be a map of resource name to quantity, "
                     'such as {cpu: "4", memory: 16Gi}')
    else:
        for resource, quantity in capacity.items():
            if not _QUANTITY.match(str(quantity)):
                problems.add(f"{where}.capacity.{resource}", f"{quantity!r} is not a quantity; "
                             "write it like 4, 500m, 16Gi or 1e3")
    labels = value.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        problems.add(f"{where}.labels", "must be a map of label name to string value")
    else:
        for key, label in labels.items():
            problem = label_key_problem(str(key)) or label_value_problem(label)
            if problem is not None:
                problems.add(f"{where}.labels[{key!r}]", problem)
    for key in ("instanceType", "region", "zone"):
        if key in value and not isinstance(value[key], str):
            problems.add(f"{where}.{key}", "must be a string")
    return problems.lines(f"Machine {name}")


def build_node(machine: dict[str, Any]) -> dict[str, Any]:
    """The Node to POST as this Machine's instance."""
    meta = machine.get("metadata") or {}
    name = str(meta.get("name"))
    value = provider_spec(machine)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "type": "kwok"}
    if value.get("instanceType"):
        labels["node.kubernetes.io/instance-type"] = value["instanceType"]
        labels[INSTANCE_TYPE_LABEL] = value["instanceType"]
    if value.get("region"):
        labels["topology.kubernetes.io/region"] = value["region"]
    if value.get("zone"):
        labels["topology.kubernetes.io/zone"] = value["zone"]
    labels.update(value.get("labels") or {})
    labels.update(wanted_labels(machine))
    capacity = {k: str(v) for k, v in (value.get("capacity") or {}).items()}
    resources = {**DEFAULT_CAPACITY, **capacity}
    spec: dict[str, Any] = {"providerID": provider_id(machine)}
    taints = [{k: v for k, v in t.items() if k in ("key", "value", "effect")}
              for t in (machine.get("spec") or {}).get("taints") or []]
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "labels": labels,
            "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE,
                            NODE_MACHINE: key_of(machine),
                            "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "nodeInfo": {"kubeletVersion": "fake", "architecture": "amd64",
                                "operatingSystem": "linux"}},
    }


def instance_of(node: dict[str, Any], machine: dict[str, Any]) -> Instance | None:
    """The Machine's instance if ``node`` is it (same providerID), else None."""
    if (node.get("spec") or {}).get("providerID") != provider_id(machine):
        return None
    name = str((node.get("metadata") or {}).get("name"))
    addresses = [{"type": "Hostname", "address": name}]
    addresses += [a for a in (node.get("status") or {}).get("addresses") or []
                  if a.get("type") != "Hostname"]
    value = provider_spec(machine)
    labels = {label: str(value[key]) for key, label in (
        ("instanceType", INSTANCE_TYPE_LABEL), ("region", REGION_LABEL), ("zone", ZONE_LABEL))
        if value.get(key)}
    return Instance(provider_id=provider_id(machine), node_name=name, addresses=addresses,
                    machine_labels=labels)


class KwokProvider:
    """Fake-Node instances through the API server."""

    kind = KIND
    name = "kwok"
    enabled_by_default = True

    @staticmethod
    def template_capacity(provider_spec: Mapping[str, Any]) -> dict[str, str] | None:
        """The capacity :func:`build_node` gives a new Node (the autoscaler builds that very
        Node for kwok MachineSets, autoscaler/template.py)."""
        capacity = provider_spec.get("capacity") or {}
        return {**DEFAULT_CAPACITY, **{k: str(v) for k, v in capacity.items()}}

    def __init__(self, kube: KubeClient):
        self.kube = kube

    def validate(self, machine: dict[str, Any]) -> list[str]:
        return validate(machine)

    async def _node(self, machine: dict[str, Any]) -> dict[str, Any] | None:
        return await self.kube.get_if_exists(node_path(str(machine["metadata"]["name"])))

    async def instance_exists(self, machine: dict[str, Any]) -> Instance | None:
        node = await self._node(machine)
        return None if node is None else instance_of(node, machine)

    async def update_instance(self, machine: dict[str, Any], instance: Instance) -> Instance:
        return instance  # the Node is the instance: the node link keeps it in line

    async def create_instance(self, machine: dict[str, Any]) -> Instance:
        body = build_node(machine)
        try:
            node = await self.kube.create(node_path(), body)
        except KubeError as error:
            if not error.conflict:
                raise
            node = await self._node(machine) or {}
        instance = instance_of(node, machine)
        if instance is None:
            name = machine["metadata"]["name"]
            raise InvalidProviderSpec(
                f"Machine {name}: a Node named {name} already exists and is not this Machine's "
                f"instance (its spec.providerID is not {provider_id(machine)}); rename the "
                "Machine or delete that Node")
        return instance

    async def delete_instance(self, machine: dict[str, Any]) -> None:
        node = await self._node(machine)
        if node is None or instance_of(node, machine) is None:
            return
        try:
            await self.kube.delete(node_path(str(node["metadata"]["name"])))
        except KubeError as error:
            if not error.not_found:
                raise
