"""Which cluster events could make an unschedulable pod schedulable again.

Design: kube-scheduler's plugins register the events that could help a pod they rejected
(``EventsToRegister``) and the queue moves a parked pod only on such an event. We keep the same
idea as two pure functions: :func:`node_change` classifies a Node update into what actually
changed (a kwok heartbeat changes nothing the placement reads, so it must not wake every parked
pod), and :func:`could_help` answers, for one parked pod and one event, whether a retry is worth
it. Anything unknown errs on the side of retrying: a wasted attempt costs a cycle, a missed one
strands a pod until the five-minute flush.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.model import NodeView, PodView
from berthmaster.scheduler.plugins.node_unschedulable import tolerates_unschedulable
from berthmaster.scheduler.plugins.taint_toleration import untolerated_taint

JSON = dict[str, Any]

# Event kinds, named as upstream's framework.ClusterEvent (resource/action).
NODE_ADD = "NodeAdd"
NODE_UPDATE = "NodeUpdate"
ASSIGNED_POD_ADD = "AssignedPodAdd"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
UNSCHEDULED_POD_ADD = "UnscheduledPodAdd"  # framework.EventUnscheduledPodAdd
SERVICE_CHANGE = "ServiceChange"
NAMESPACE_CHANGE = "NamespaceChange"
PDB_CHANGE = "PodDisruptionBudgetChange"
CONTROLLER_CHANGE = "ControllerChange"
PRIORITY_CLASS_CHANGE = "PriorityClassChange"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
FORCE_ACTIVATE = "ForceActivate"


@dataclass(frozen=True)
class ClusterEvent:
    """One change in the cluster, as the queue sees it: its kind and, for node updates, what
    changed (``labels``, ``taints``, ``allocatable``, ``unschedulable``, ``conditions``) and
    the node as it is now."""

    kind: str
    changes: frozenset[str] = frozenset()
    node: JSON | None = field(default=None, compare=False, hash=False)


def node_change(old: JSON, new: JSON) -> frozenset[str]:
    """What a Node update changed that placement reads; empty for heartbeats."""
    changes: set[str] = set()
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    if (old_meta.get("labels") or {}) != (new_meta.get("labels") or {}):
        changes.add("labels")
    if (old_spec.get("taints") or []) != (new_spec.get("taints") or []):
        changes.add("taints")
    if bool(old_spec.get("unschedulable")) != bool(new_spec.get("unschedulable")):
        changes.add("unschedulable")
    if (old_status.get("allocatable") or {}) != (new_status.get("allocatable") or {}):
        changes.add("allocatable")
    if _condition_statuses(old_status) != _condition_statuses(new_status):
        changes.add("conditions")
    if (old_status.get("images") or []) != (new_status.get("images") or []):
        changes.add("images")
    return frozenset(changes)


def tolerates_node(pod: JSON, node: JSON) -> bool:
    """Whether ``pod`` tolerates every NoSchedule/NoExecute taint of ``node`` and, when the
    node is cordoned, its unschedulable taint."""
    view, node_view = PodView.from_dict(pod), NodeView.from_dict(node)
    if node_view.unschedulable and not tolerates_unschedulable(view):
        return False
    return untolerated_taint(view.tolerations, node_view.taints) is None


def _condition_statuses(status: JSON) -> dict[str, str]:
    return {c.get("type", ""): c.get("status", "") for c in status.get("conditions") or []}


def _affinity(pod: JSON) -> JSON:
    return ((pod.get("spec") or {}).get("affinity")) or {}


def _has_pod_affinity(pod: JSON) -> bool:
    required = ((_affinity(pod).get("podAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return bool(required)


def _has_spread(pod: JSON) -> bool:
    return bool((pod.get("spec") or {}).get("topologySpreadConstraints"))


TAINT_UPDATE = "Node/UpdateNodeTaint"
_NODE_UPDATES = {
    "labels": "Node/UpdateNodeLabel",
    "taints": TAINT_UPDATE,
    "unschedulable": TAINT_UPDATE,
    "allocatable": "Node/UpdateNodeAllocatable",
    "conditions": "Node/UpdateNodeCondition",
}
# volume-related kinds whose events are named "Kind/Action" already (the cache names them)
_VOLUME_KINDS = ("PersistentVolume", "StorageClass", "CSINode", "CSIDriver",
                 "CSIStorageCapacity")
_SIMPLE = {
    NODE_ADD: ("Node/Add",),
    ASSIGNED_POD_ADD: ("Pod/Add",),
    ASSIGNED_POD_UPDATE: ("Pod/UpdatePodLabel",),
    ASSIGNED_POD_DELETE: ("Pod/Delete",),
    UNSCHEDULED_POD_ADD: ("Pod/Add",),
    SERVICE_CHANGE: ("Service/Add",),
}


def event_names(event: ClusterEvent) -> frozenset[str]:
    """The engine's names ("Kind/Action", as upstream's ClusterEvent) for one event."""
    if event.kind == NODE_UPDATE:
        return frozenset(_NODE_UPDATES[c] for c in event.changes if c in _NODE_UPDATES)
    if event.kind.startswith(_VOLUME_KINDS) or "/" in event.kind:
        # volume kinds, and the kinds plugins asked to have watched ("PodGroup/Add")
        return frozenset((event.kind,))
    return frozenset(_SIMPLE.get(event.kind, ()))


def could_help(pod: JSON, event: ClusterEvent,
               registered: frozenset[str] | None = None) -> bool:
    """Whether ``event`` could make ``pod`` (rejected on its last attempt) fit now.

    ``registered``: the events the predicates that rejected the pod said could help it (the
    engine's ``unschedulable_events``); when known, they decide for the events they name.
    """
    kind = event.kind
    if kind in (UNSCHEDULABLE_TIMEOUT, FORCE_ACTIVATE):
        return True
    if registered:
        names = event_names(event)
        if names:
            relevant = names & registered
            if relevant == {TAINT_UPDATE} and event.node is not None:
                # only TaintToleration or NodeUnschedulable asked for it: the change helps a pod
                # that now tolerates the node's taints (upstream's queueing hints,
                # isSchedulableAfterNodeChange), not every pod a taint once kept off some node
                return tolerates_node(pod, event.node)
            return bool(relevant)
    if kind in (NODE_ADD, ASSIGNED_POD_DELETE):
        return True
    if kind == NODE_UPDATE:
        # Heartbeats and image lists never turn a rejection into a fit; everything else may.
        return bool(event.changes - {"images"})
    if kind in (ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE):
        # A new or relabelled pod can satisfy a required pod affinity, or lift a spread
        # domain's minimum; it cannot free resources, ports or anti-affinity.
        return _has_pod_affinity(pod) or _has_spread(pod)
    if kind in (SERVICE_CHANGE, CONTROLLER_CHANGE):
        # Service affinity / selector spreading read these.
        return True
    if kind == NAMESPACE_CHANGE:
        return _has_pod_affinity(pod)
    if kind == PDB_CHANGE:
        # Preemption honours PDBs: a relaxed budget may allow a victim now.
        return True
    if kind.startswith(_VOLUME_KINDS):
        return bool((pod.get("spec") or {}).get("volumes"))
    return kind == PRIORITY_CLASS_CHANGE
