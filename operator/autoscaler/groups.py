"""Node groups: the MachineSets the autoscaler may resize, and which nodes belong to each.

Design: as upstream's Cluster API provider, a MachineSet is a node group exactly when it carries
both ``machine.openshift.io/cluster-api-autoscaler-node-group-{min,max}-size`` annotations (a
MachineAutoscaler writes them). Nodes are tied to their group through Machines: a Machine names
its MachineSet by controller owner reference (or the ``machine.openshift.io/cluster-api-machineset``
label) and its node by ``status.nodeRef``; a node's ``machine.openshift.io/machine`` annotation
is the fallback. A registered node that still carries a startup taint counts as upcoming, not
as ready capacity (upstream's ``FilterOutNodesWithStartupTaints``). Pure: lists in, frozen views
out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.keys import object_key
from berthmaster.operator.autoscaler.template import (
    TemplateError,
    has_startup_taint,
    template_node,
)

JSON = dict[str, Any]

MIN_SIZE_KEY = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE_KEY = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"
DELETE_MACHINE_KEY = "machine.openshift.io/delete-machine"
MACHINE_SET_LABEL = "machine.openshift.io/cluster-api-machineset"
NODE_MACHINE_KEY = "machine.openshift.io/machine"


@dataclass(frozen=True)
class NodeGroup:
    """One autoscaled MachineSet as seen in this loop."""

    namespace: str
    name: str
    min_size: int
    max_size: int
    target_size: int
    nodes: tuple[str, ...] = ()
    machines: tuple[str, ...] = ()
    machines_without_node: tuple[str, ...] = ()
    deleting_machines: tuple[str, ...] = ()
    starting_nodes: tuple[str, ...] = ()  # registered, still carrying a startup taint
    template: JSON | None = None
    template_error: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return object_key(self.namespace, self.name)

    @property
    def upstream_id(self) -> str:
        """cluster-autoscaler's node group id for a MachineSet (clusterapi provider's
        ``unstructuredScalableResource.ID``): ``MachineSet/<namespace>/<name>``."""
        return f"MachineSet/{self.namespace}/{self.name}"

    @property
    def upcoming(self) -> int:
        """Replicas asked for that have no registered node yet (machines still provisioning,
        or not even created by the MachineSet controller), plus registered nodes still starting."""
        live = [m for m in self.machines if m not in self.deleting_machines]
        provisioning = [m for m in live if m in self.machines_without_node]
        return len(provisioning) + len(self.starting_nodes) + max(0, self.target_size - len(live))


@dataclass(frozen=True)
class ClusterView:
    """Groups plus the indexes the decisions need."""

    groups: tuple[NodeGroup, ...]
    node_group: Mapping[str, str]  # node name -> group id
    node_machine: Mapping[str, tuple[str, str]]  # node name -> (namespace, machine name)
    problems: tuple[str, ...] = ()

    def group(self, group_id: str) -> NodeGroup | None:
        for group in self.groups:
            if group.id == group_id:
                return group
        return None


def _size(annotations: Mapping[str, str], key: str) -> int:
    value = annotations[key]
    try:
        size = int(str(value))
    except ValueError as error:
        raise ValueError(f"annotation {key}={value!r} is not a whole number") from error
    if size < 0:
        raise ValueError(f"annotation {key}={value!r} is negative")
    return size


def _owner_machine_set(machine: Mapping[str, Any]) -> str | None:
    meta = machine.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "MachineSet":
            return str(ref.get("name"))
    label = (meta.get("labels") or {}).get(MACHINE_SET_LABEL)
    return str(label) if label else None


MachinesBySet = dict[tuple[str, str], list[Mapping[str, Any]]]
NodesByName = Mapping[str, Mapping[str, Any]]


def _index_machines(machines: Iterable[Mapping[str, Any]], nodes_by_name: NodesByName
                    ) -> tuple[MachinesBySet, dict[str, tuple[str, str]]]:
    """The Machines of each MachineSet (namespace, name), and each node's Machine: its
    ``status.nodeRef``, else the node's ``machine.openshift.io/machine`` annotation."""
    node_machine: dict[str, tuple[str, str]] = {}
    machines_of: MachinesBySet = {}
    for machine in machines:
        meta = machine.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        owner = _owner_machine_set(machine)
        if owner:
            machines_of.setdefault((namespace, owner), []).append(machine)
        node_ref = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        if node_ref:
            node_machine[str(node_ref)] = (namespace, str(meta.get("name")))
    for node_name, node in nodes_by_name.items():
        ref = ((node.get("metadata") or {}).get("annotations") or {}).get(NODE_MACHINE_KEY)
        if ref and node_name not in node_machine and "/" in ref:
            namespace, _, machine_name = ref.partition("/")
            node_machine[node_name] = (namespace, machine_name)
    return machines_of, node_machine


def _sizes(annotations: Mapping[str, str]) -> tuple[int, int]:
    min_size, max_size = _size(annotations, MIN_SIZE_KEY), _size(annotations, MAX_SIZE_KEY)
    if min_size > max_size:
        raise ValueError(f"min size {min_size} is greater than max size {max_size}")
    return min_size, max_size


def _node_group(machine_set: Mapping[str, Any], sizes: tuple[int, int],
                members: Iterable[Mapping[str, Any]], nodes_by_name: NodesByName,
                startup_taints: Collection[str]) -> NodeGroup:
    """One autoscaled MachineSet: its Machines, their registered (and starting) nodes, and the
    template node a new one would be (:mod:`.template`, sampled from a ready member)."""
    meta = machine_set.get("metadata") or {}
    node_names, without_node, deleting, machine_names = [], [], [], []
    for machine in members:
        machine_meta = machine.get("metadata") or {}
        machine_name = str(machine_meta.get("name"))
        machine_names.append(machine_name)
        if machine_meta.get("deletionTimestamp"):
            deleting.append(machine_name)
        node_ref = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        if node_ref and node_ref in nodes_by_name:
            node_names.append(str(node_ref))
        else:
            without_node.append(machine_name)
    starting = [n for n in node_names if has_startup_taint(nodes_by_name[n], startup_taints)]
    sample = next((nodes_by_name[n] for n in node_names if n not in starting),
                  next((nodes_by_name[n] for n in node_names), None))
    template: JSON | None = None
    template_error: str | None = None
    try:
        template = template_node(machine_set, sample, startup_taints=startup_taints)
    except TemplateError as error:
        template_error = str(error)
    spec = machine_set.get("spec") or {}
    return NodeGroup(
        namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
        min_size=sizes[0], max_size=sizes[1],
        target_size=int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1),
        nodes=tuple(sorted(node_names)), machines=tuple(sorted(machine_names)),
        machines_without_node=tuple(sorted(without_node)),
        deleting_machines=tuple(sorted(deleting)), starting_nodes=tuple(sorted(starting)),
        template=template,
        template_error=template_error, labels=dict(meta.get("labels") or {}),
    )


def build_cluster_view(machine_sets: Iterable[Mapping[str, Any]],
                       machines: Iterable[Mapping[str, Any]],
                       nodes: Iterable[Mapping[str, Any]],
                       startup_taints: Collection[str] = ()) -> ClusterView:
    """The autoscaled MachineSets (those with both size annotations) as node groups, sorted by
    id; a MachineSet with bad sizes is left out and named in ``problems``."""
    nodes_by_name = {n["metadata"]["name"]: n for n in nodes}
    machines_of, node_machine = _index_machines(machines, nodes_by_name)
    groups: list[NodeGroup] = []
    problems: list[str] = []
    for machine_set in machine_sets:
        meta = machine_set.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if MIN_SIZE_KEY not in annotations or MAX_SIZE_KEY not in annotations:
            continue
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        try:
            sizes = _sizes(annotations)
        except ValueError as error:
            problems.append(f"MachineSet {namespace}/{name}: {error}; fix its MachineAutoscaler")
            continue
        groups.append(_node_group(machine_set, sizes, machines_of.get((namespace, name), []),
                                  nodes_by_name, startup_taints))
    # in the MachineSets' order: a node two Machines claim belongs to the last one's set
    node_group = {node: g.id for g in groups for node in g.nodes}
    groups.sort(key=lambda g: g.id)
    return ClusterView(tuple(groups), node_group, node_machine, tuple(problems))
