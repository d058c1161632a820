"""The template node of a MachineSet: what one more replica would look like to the scheduler.

Design: a Node object (plain dict) is assembled from, in rising precedence,
1. a registered node of the MachineSet, if one exists (its allocatable, labels and taints),
2. the MachineSet's machine template: for the kwok provider, the Node its ``build_node`` would
   register for a new Machine (one truth for that shape); otherwise
   ``spec.template.spec.metadata.labels``/``.taints``, the capacity the installed provider of
   the providerSpec's kind gives (``template_capacity``: the AWS provider reads its instance
   type in cluster-autoscaler's EC2 table) and ``providerSpec.value``'s
   ``capacity``/``labels``/``taints``,
3. OpenShift's machine annotations (``machine.openshift.io/vCPU``, ``memoryMb``, ``GPU``,
   ``maxPods``) and upstream's scale-from-zero annotations
   ``capacity.cluster-autoscaler.kubernetes.io/{cpu,memory,ephemeral-disk,maxPods,gpu-type,
   gpu-count,labels,taints}``: annotations override what the provider says, as
   cluster-autoscaler's clusterapi provider lets them override the infrastructure template's
   ``status.capacity`` (cloudprovider/clusterapi/clusterapi_unstructured.go, InstanceCapacity).
Per-node identity (hostname, the provider id) is replaced by the template's own name, so pod
anti-affinity by hostname treats every template copy as a distinct node. Startup taints (the
``startupTaints`` keys and upstream's ``startup-taint.cluster-autoscaler.kubernetes.io/`` and
``ignore-taint.cluster-autoscaler.kubernetes.io/`` prefixes) are left out: a new node sheds them
once it has started, as upstream's ``taints.SanitizeTaints`` assumes. A MachineSet whose
capacity cannot be known raises :class:`TemplateError` naming the annotations to add.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.operator.machines.machineset import build_machine
from berthmaster.operator.machines.providers import kwok, registry

JSON = dict[str, Any]

CAPACITY_PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
CPU_KEY = CAPACITY_PREFIX + "cpu"
MEMORY_KEY = CAPACITY_PREFIX + "memory"
DISK_KEY = CAPACITY_PREFIX + "ephemeral-disk"
MAX_PODS_KEY = CAPACITY_PREFIX + "maxPods"
GPU_TYPE_KEY = CAPACITY_PREFIX + "gpu-type"
GPU_COUNT_KEY = CAPACITY_PREFIX + "gpu-count"
LABELS_KEY = CAPACITY_PREFIX + "labels"
TAINTS_KEY = CAPACITY_PREFIX + "taints"
# What OpenShift's machine-api providers put on MachineSets (and its autoscaler reads).
OPENSHIFT_CPU_KEY = "machine.openshift.io/vCPU"
OPENSHIFT_MEMORY_MB_KEY = "machine.openshift.io/memoryMb"
OPENSHIFT_GPU_KEY = "machine.openshift.io/GPU"
OPENSHIFT_MAX_PODS_KEY = "machine.openshift.io/maxPods"
DEFAULT_GPU_TYPE = "nvidia.com/gpu"
DEFAULT_MAX_PODS = "110"  # upstream's default when maxPods is not given
HOSTNAME_LABEL = "kubernetes.io/hostname"
# upstream's utils/taints StartupTaintPrefix and (deprecated) IgnoreTaintPrefix
STARTUP_TAINT_PREFIXES = ("startup-taint.cluster-autoscaler.kubernetes.io/",
                          "ignore-taint.cluster-autoscaler.kubernetes.io/")


def is_startup_taint(key: str, startup_taints: Collection[str] = ()) -> bool:
    return key in startup_taints or key.startswith(STARTUP_TAINT_PREFIXES)


def has_startup_taint(node: Mapping[str, Any], startup_taints: Collection[str] = ()) -> bool:
    """Whether ``node`` is still starting: upstream counts such a node as unready."""
    return any(is_startup_taint(str(t.get("key", "")), startup_taints)
               for t in (node.get("spec") or {}).get("taints") or [])


class TemplateError(ValueError):
    """The MachineSet does not say enough to build a template node."""


def _parse_pairs(text: str, where: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TemplateError(f"{where}: {item!r} is not key=value; write k1=v1,k2=v2")
        pairs[key] = value
    return pairs


def _parse_taints(text: str, where: str) -> list[JSON]:
    taints = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        head, sep, effect = item.rpartition(":")
        key, _, value = head.partition("=")
        if not sep or not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise TemplateError(f"{where}: {item!r} is not key=value:Effect (NoSchedule, "
                                "PreferNoSchedule or NoExecute)")
        taint: JSON = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return taints


def _merge_taints(base: list[JSON], more: list[JSON]) -> list[JSON]:
    merged = {(t.get("key"), t.get("effect")): t for t in base}
    for taint in more:
        merged[(taint.get("key"), taint.get("effect"))] = taint
    return list(merged.values())


def machine_set_name(machine_set: Mapping[str, Any]) -> str:
    meta = machine_set.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


@dataclass
class _Shape:
    """What a template node is made of, filled source by source, later sources winning."""

    capacity: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[JSON] = field(default_factory=list)

    def add_taints(self, taints: Sequence[JSON]) -> None:
        self.taints = _merge_taints(self.taints, list(taints))


def _from_sample(shape: _Shape, sample_node: Mapping[str, Any]) -> None:
    """A registered node of the set: its allocatable, labels and lasting taints."""
    status = sample_node.get("status") or {}
    shape.capacity.update(status.get("allocatable") or status.get("capacity") or {})
    shape.labels.update((sample_node.get("metadata") or {}).get("labels") or {})
    shape.taints = [t for t in (sample_node.get("spec") or {}).get("taints") or []
                    if not str(t.get("key", "")).startswith("node.kubernetes.io/")
                    and t.get("key") not in ("ToBeDeletedByClusterAutoscaler",
                                             "DeletionCandidateOfClusterAutoscaler")]


def _from_provider(shape: _Shape, machine_set: Mapping[str, Any], provider: Any) -> None:
    if isinstance(provider, Mapping) and provider.get("kind") == kwok.KIND:
        # The very Node the kwok provider would register for a new Machine of this set.
        machine = build_machine(dict(machine_set))
        machine["metadata"]["name"] = f"{(machine_set.get('metadata') or {}).get('name', '')}" \
            "-template"
        node = kwok.build_node(machine)
        shape.capacity.update(node["status"]["capacity"])
        shape.labels.update({k: v for k, v in node["metadata"]["labels"].items()
                             if k != "machine.openshift.io/machine"})  # per-machine identity
        shape.add_taints(node["spec"].get("taints") or [])
    elif isinstance(provider, Mapping):
        # What the provider knows of the instance type (AWS: cluster-autoscaler's instance
        # table); the annotations below still win, as upstream's InstanceCapacity lets them.
        shape.capacity.update(registry.template_capacity(provider) or {})
        shape.capacity.update(provider.get("capacity") or {})
        shape.labels.update(provider.get("labels") or {})
        shape.add_taints(provider.get("taints") or [])


def _from_annotations(shape: _Shape, annotations: Mapping[str, str], where: str) -> None:
    """The MachineSet's scale-from-zero annotations, OpenShift's and upstream's
    (cloudprovider/clusterapi/clusterapi_unstructured.go ``InstanceCapacity``, ``Labels``,
    ``Taints``); they win over every other source."""
    capacity = shape.capacity
    if OPENSHIFT_CPU_KEY in annotations:
        capacity["cpu"] = annotations[OPENSHIFT_CPU_KEY]
    if OPENSHIFT_MEMORY_MB_KEY in annotations:
        capacity["memory"] = f"{annotations[OPENSHIFT_MEMORY_MB_KEY]}Mi"
    if OPENSHIFT_MAX_PODS_KEY in annotations:
        capacity["pods"] = annotations[OPENSHIFT_MAX_PODS_KEY]
    if OPENSHIFT_GPU_KEY in annotations and annotations[OPENSHIFT_GPU_KEY] not in ("", "0"):
        capacity[DEFAULT_GPU_TYPE] = annotations[OPENSHIFT_GPU_KEY]
    for key, resource in ((CPU_KEY, "cpu"), (MEMORY_KEY, "memory"),
                          (DISK_KEY, "ephemeral-storage"), (MAX_PODS_KEY, "pods")):
        if key in annotations:
            capacity[resource] = annotations[key]
    if GPU_COUNT_KEY in annotations:
        capacity[annotations.get(GPU_TYPE_KEY) or DEFAULT_GPU_TYPE] = annotations[GPU_COUNT_KEY]
    if LABELS_KEY in annotations:
        shape.labels.update(_parse_pairs(annotations[LABELS_KEY],
                                         f"{where} annotation {LABELS_KEY}"))
    if TAINTS_KEY in annotations:
        shape.add_taints(_parse_taints(annotations[TAINTS_KEY],
                                       f"{where} annotation {TAINTS_KEY}"))


def _node_of(shape: _Shape, machine_set: Mapping[str, Any], index: int) -> JSON:
    name = f"template-node-for-{(machine_set.get('metadata') or {}).get('name', '')}-{index}"
    labels = {**shape.labels, HOSTNAME_LABEL: name}
    labels.setdefault("kubernetes.io/os", "linux")
    labels.setdefault("kubernetes.io/arch", "amd64")
    capacity = {k: str(v) for k, v in shape.capacity.items()}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"berthmaster.io/template-of": machine_set_name(machine_set)}},
        "spec": {"taints": copy.deepcopy(shape.taints)} if shape.taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def template_node(machine_set: Mapping[str, Any], sample_node: Mapping[str, Any] | None = None,
                  index: int = 0, startup_taints: Collection[str] = ()) -> JSON:
    """The Node a new replica of ``machine_set`` would register as (``index`` names the copy):
    a registered node of the set, then the Machine template's labels and taints, then the
    provider, then the annotations (:func:`_from_annotations`), each winning over the one
    before; startup taints dropped."""
    meta = machine_set.get("metadata") or {}
    where = f"MachineSet {machine_set_name(machine_set)}"
    machine_spec = ((machine_set.get("spec") or {}).get("template") or {}).get("spec") or {}
    shape = _Shape()
    if sample_node is not None:
        _from_sample(shape, sample_node)
    shape.labels.update(((machine_spec.get("metadata") or {}).get("labels")) or {})
    shape.add_taints(machine_spec.get("taints") or [])
    provider = ((machine_spec.get("providerSpec") or {}).get("value")) or {}
    _from_provider(shape, machine_set, provider)
    _from_annotations(shape, meta.get("annotations") or {}, where)
    shape.taints = [t for t in shape.taints
                    if not is_startup_taint(str(t.get("key", "")), startup_taints)]
    missing = [name for name in ("cpu", "memory") if name not in shape.capacity]
    if missing:
        raise TemplateError(
            f"{where} has no {' or '.join(missing)} capacity and no registered node to copy; "
            f"annotate it with {CPU_KEY} and {MEMORY_KEY} (or give providerSpec.value.capacity)")
    shape.capacity.setdefault("pods", DEFAULT_MAX_PODS)
    return _node_of(shape, machine_set, index)


def copy_of(template: Mapping[str, Any], index: int) -> JSON:
    """Another copy of a template node, with its own name and hostname label."""
    node = copy.deepcopy(dict(template))
    base = str(node["metadata"]["name"]).rsplit("-", 1)[0]
    name = f"{base}-{index}"
    node["metadata"]["name"] = name
    node["metadata"]["labels"][HOSTNAME_LABEL] = name
    return node
