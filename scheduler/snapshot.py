"""Indexed cluster state the engine decides against, maintained incrementally.

One ``Snapshot`` holds the nodes (as ``NodeInfo``: the node's view plus the running totals of
the pods counted on it), every pod by uid, and the other objects placement reads (namespaces,
services and controllers, PDBs, priority classes, volumes, CSINodes). Each update is O(1) or
O(labels):

- ``label_index[key][value]`` -> node names, so selectors and topology domains are set lookups;
- ``pod_label_index[key][value]`` -> uids of the pods counted on nodes, so inter-pod affinity
  finds matching pods without scanning them all;
- the distinct affinity terms of assigned pods, counted per node (``term_index``) and filed by
  the pod labels they could select (``term_anchors``), so the "existing pods' anti-affinity"
  check meets only the terms that might select the incoming pod;
- pods per topology domain for the affinity terms of assigned pods and the selectors decisions
  ask about (``carrier_domains``, ``matching_domains``; see ``domains``), updated per pod add and
  remove and rebuilt when a node change bumps ``topology_epoch``.

Pods with ``spec.nodeName`` count on that node (terminal pods never do); pods without it are
remembered (``get_pod``) but use nothing. ``assume`` counts a pod on a node before its binding
lands; ``forget`` undoes that. Pods bound to a node the snapshot does not know yet are kept and
attached when the node arrives.

The snapshot is not thread-safe: the running scheduler mutates it from its single event loop.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import zip_longest
from typing import Any

from berthmaster.foundation.keys import key_of, object_key
from berthmaster.scheduler.domains import WATCHES, Domains
from berthmaster.scheduler.model import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NOTHING,
    PODS,
    AffinityTerm,
    LabelSelector,
    NodeView,
    Obj,
    PodView,
    Requirement,
    label_selector,
    resolve_priority,
    selector_from_map,
    zone_key,
)
from berthmaster.scheduler.pod_resources import status_resources
from berthmaster.scheduler.term_anchors import TermsBySelector

NAMESPACED_KINDS = {
    "Service": "services",
    "ReplicationController": "replication_controllers",
    "ReplicaSet": "replica_sets",
    "StatefulSet": "stateful_sets",
    "PodDisruptionBudget": "pdbs",
    "PersistentVolumeClaim": "persistent_volume_claims",
    "CSIStorageCapacity": "csi_storage_capacities",
}
CLUSTER_KINDS = {
    "Namespace": "namespaces",
    "PriorityClass": "priority_classes",
    "PersistentVolume": "persistent_volumes",
    "StorageClass": "storage_classes",
    "CSINode": "csi_nodes",
    "CSIDriver": "csi_drivers",
}
TERM_KINDS = ("anti_required", "affinity_required", "affinity_preferred", "anti_preferred")
KINDS = frozenset({*NAMESPACED_KINDS, *CLUSTER_KINDS, "Node", "Pod"})
PREFER_AVOID_PODS_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"


def pod_key(pod: Obj) -> str:
    """The snapshot's key for a pod: metadata.uid, or namespace/name when there is no uid."""
    meta = pod.get("metadata") or {}
    uid = meta.get("uid")
    if uid:
        return str(uid)
    return object_key(meta.get("namespace") or "default",
                      meta.get("name") or meta.get("generateName"))


def placement_view(pod: Obj) -> tuple[Any, ...]:
    """The parts of a pod that placement reads once it is bound (status churn such as
    conditions, IPs and container states is left out, so it costs no snapshot update; the
    resources an in-place resize reports are in: pod_resources.status_resources)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return (pod.get("spec"), meta.get("labels"), meta.get("deletionTimestamp"),
            meta.get("ownerReferences"), status.get("phase"), status.get("startTime"),
            status.get("nominatedNodeName"), status_resources(pod))


def _version(obj: Obj) -> int:
    """metadata.resourceVersion as a number (etcd's revision; as the assume cache compares),
    -1 when absent or not a number."""
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(raw))
    except ValueError:
        return -1


def _object_key(kind: str, obj: Obj) -> str:
    if kind in NAMESPACED_KINDS:
        return key_of(obj, default_namespace="default")
    return str((obj.get("metadata") or {}).get("name") or "")


class NodeInfo:
    """A node and the aggregate of the pods counted on it (the per-node path reads only this).

    ``memo`` holds results computed from this node's own state alone (the engine's node-local
    scores, keyed by what the pod contributes): every change to the node or to the pods counted
    on it empties it, so an entry is always the value a fresh computation would give.
    """

    __slots__ = ("alloc_cpu", "alloc_ephemeral", "alloc_memory", "alloc_pods", "allocatable",
                 "labels", "memo", "name", "nonzero_cpu", "nonzero_memory", "pods", "req_cpu",
                 "req_ephemeral", "req_memory", "requested", "taints", "used_ports", "view")

    def __init__(self, view: NodeView) -> None:
        self.memo: dict[str, Any] = {}
        self.pods: dict[str, PodView] = {}
        self.requested: dict[str, int] = {}
        self.used_ports: dict[tuple[str, str, int], int] = {}
        self.req_cpu = self.req_memory = self.req_ephemeral = 0
        self.nonzero_cpu = self.nonzero_memory = 0
        self.set_view(view)

    def set_view(self, view: NodeView) -> None:
        self.memo.clear()
        self.view = view
        self.name = view.name
        self.labels = view.labels
        self.taints = view.taints
        self.allocatable = view.allocatable
        self.alloc_cpu = view.allocatable.get(CPU, 0)
        self.alloc_memory = view.allocatable.get(MEMORY, 0)
        self.alloc_ephemeral = view.allocatable.get(EPHEMERAL_STORAGE, 0)
        self.alloc_pods = view.allocatable.get(PODS, 110 if PODS not in view.allocatable else 0)

    def add_pod(self, pod: PodView, sign: int = 1) -> None:
        self.memo.clear()
        if sign > 0:
            self.pods[pod.uid] = pod
        else:
            self.pods.pop(pod.uid, None)
        req = self.requested
        for name, amount in pod.requests.items():
            req[name] = req.get(name, 0) + sign * amount
        self.req_cpu = req.get(CPU, 0)
        self.req_memory = req.get(MEMORY, 0)
        self.req_ephemeral = req.get(EPHEMERAL_STORAGE, 0)
        self.nonzero_cpu += sign * pod.nonzero_cpu
        self.nonzero_memory += sign * pod.nonzero_memory
        ports = self.used_ports
        for port in pod.host_ports:
            n = ports.get(port, 0) + sign
            if n > 0:
                ports[port] = n
            else:
                ports.pop(port, None)

    def clone(self) -> NodeInfo:
        """A copy whose pod set and totals can change without touching the snapshot."""
        other = NodeInfo.__new__(NodeInfo)
        for slot in NodeInfo.__slots__:
            setattr(other, slot, getattr(self, slot))
        other.memo = {}
        other.pods = dict(self.pods)
        other.requested = dict(self.requested)
        other.used_ports = dict(self.used_ports)
        return other

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


class WhatIf:
    """Pods taken out of a snapshot for a what-if question; see :meth:`Snapshot.what_if`."""

    __slots__ = ("_placed", "_removed", "_snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._removed: dict[str, PodView] = {}
        self._placed: dict[str, PodView] = {}

    def place(self, pod: PodView, node: str) -> None:
        """Count the pending ``pod`` on ``node`` (as if bound there) until the end of the
        scope: a nominated pod's room, as upstream's addGENominatedPods counts it."""
        snapshot = self._snapshot
        if pod.uid in self._placed or snapshot.get_pod(pod.uid) is not pod:
            return
        snapshot._remove_view(pod.uid)
        raw = dict(pod.raw)
        raw["spec"] = {**(raw.get("spec") or {}), "nodeName": node}
        snapshot._add_view(pod.placed_on(raw, node))
        self._placed[pod.uid] = pod

    def remove(self, pod: PodView) -> None:
        """Take ``pod`` out (it no longer counts on its node) until put back or the end."""
        if self._snapshot.get_pod(pod.uid) is not None:
            self._snapshot._remove_view(pod.uid)
            self._removed[pod.uid] = pod

    def put_back(self, pod: PodView) -> None:
        """Undo :meth:`remove` for ``pod`` within the scope."""
        if self._removed.pop(pod.uid, None) is not None:
            self._snapshot._add_view(pod)

    def restore(self) -> None:
        """Put back every pod still out, and every placed pod where it was (the end of the
        scope)."""
        for pod in self._removed.values():
            self._snapshot._add_view(pod)
        self._removed.clear()
        for uid, pod in self._placed.items():
            self._snapshot._remove_view(uid)
            self._snapshot._add_view(pod)
        self._placed.clear()


# scheduler-plugins' PodGroup label: the snapshot indexes pods by it (Coscheduling counts a
# group's members every cycle)
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def _counts_on_node(pod: PodView) -> bool:
    return bool(pod.node_name) and pod.phase not in ("Succeeded", "Failed")


class Snapshot:
    """The cluster as the engine sees it; see the module docstring."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._order: list[NodeInfo] | None = []
        # NodeTree (pkg/scheduler/backend/cache/node_tree.go): zone key -> its nodes in the
        # order they joined it; zones in the order they first appeared
        self._zones: dict[str, list[str]] = {}
        self._zone_of: dict[str, str] = {}
        self.label_index: dict[str, dict[str, set[str]]] = {}
        self._pods: dict[str, PodView] = {}
        self._pods_by_node: dict[str, dict[str, PodView]] = {}
        self.pod_label_index: dict[str, dict[str, set[str]]] = {}
        self.pods_with_required_anti: dict[str, PodView] = {}
        # pending pods with status.nominatedNodeName, by that node: room reserved by preemption
        self.nominated_pods: dict[str, dict[str, PodView]] = {}
        self.pods_with_affinity_terms: dict[str, PodView] = {}
        # distinct affinity terms of assigned pods -> node name -> how many pods carry it there
        self.term_index: dict[str, dict[AffinityTerm, dict[str, int]]] = {
            kind: {} for kind in TERM_KINDS}
        # the same distinct terms filed by the pod labels they could select (term_anchors)
        self.term_anchors: dict[str, TermsBySelector] = {
            kind: TermsBySelector() for kind in TERM_KINDS}
        # pods per topology domain (see domains): per kind and affinity term of assigned pods
        # (asked for once), the pods carrying it; per watched selector, the pods it matches
        self.topology_epoch = 0
        self._carriers: dict[str, dict[AffinityTerm, Domains]] = {
            kind: {} for kind in TERM_KINDS}
        self._watches: dict[AffinityTerm, Domains] = {}
        self._watch_anchors = TermsBySelector()
        self._assumed_previous: dict[str, PodView | None] = {}
        self.prefer_no_schedule_nodes: set[str] = set()
        self.tainted_nodes: set[str] = set()  # nodes with a NoSchedule or NoExecute taint
        self.unschedulable_nodes: set[str] = set()
        self.avoid_pods_nodes: set[str] = set()
        self.image_index: dict[str, set[str]] = {}
        self.namespaces: dict[str, Obj] = {}
        self.services: dict[str, Obj] = {}
        self.replication_controllers: dict[str, Obj] = {}
        self.replica_sets: dict[str, Obj] = {}
        self.stateful_sets: dict[str, Obj] = {}
        self.pdbs: dict[str, Obj] = {}
        self.priority_classes: dict[str, Obj] = {}
        self.persistent_volumes: dict[str, Obj] = {}
        # (kind, key) -> the API server's object under an assumed PV or PVC (see assume_volume)
        self._volume_api: dict[tuple[str, str], Obj] = {}
        self.persistent_volume_claims: dict[str, Obj] = {}
        self.storage_classes: dict[str, Obj] = {}
        self.csi_nodes: dict[str, Obj] = {}  # storage.k8s.io CSINodes, by (node) name
        # the kinds plugins asked to have watched (framework.Watched), by kind, then by
        # "namespace/name" (or name)
        self.plugin_objects: dict[str, dict[str, Obj]] = {}
        # (namespace, GROUP_LABEL's value) -> uids of every pod held, pending ones included
        self._groups: dict[tuple[str, str], set[str]] = {}
        self.csi_drivers: dict[str, Obj] = {}  # storage.k8s.io CSIDrivers, by (driver) name
        self.csi_storage_capacities: dict[str, Obj] = {}  # by namespace/name
        self._selectors: dict[tuple[str, str], LabelSelector] = {}
        self.generation = 0
        # results that depend only on the nodes (e.g. node sets matching a selector); cleared
        # whenever a node is added, changed or removed
        self.node_cache: dict[Any, Any] = {}

    # ---------------------------------------------------------------- building
    @classmethod
    def build(cls, *, nodes: Iterable[Obj] = (), pods: Iterable[Obj] = (),
              namespaces: Iterable[Obj] = (), services: Iterable[Obj] = (),
              replication_controllers: Iterable[Obj] = (), replica_sets: Iterable[Obj] = (),
              stateful_sets: Iterable[Obj] = (), pdbs: Iterable[Obj] = (),
              priority_classes: Iterable[Obj] = (), persistent_volumes: Iterable[Obj] = (),
              persistent_volume_claims: Iterable[Obj] = (),
              storage_classes: Iterable[Obj] = (), csi_nodes: Iterable[Obj] = (),
              csi_drivers: Iterable[Obj] = (),
              csi_storage_capacities: Iterable[Obj] = ()) -> Snapshot:
        snap = cls()
        groups: list[tuple[str, Iterable[Obj]]] = [
            ("Namespace", namespaces), ("PriorityClass", priority_classes),
            ("Service", services), ("ReplicationController", replication_controllers),
            ("ReplicaSet", replica_sets), ("StatefulSet", stateful_sets),
            ("PodDisruptionBudget", pdbs), ("PersistentVolume", persistent_volumes),
            ("PersistentVolumeClaim", persistent_volume_claims),
            ("StorageClass", storage_classes), ("CSINode", csi_nodes),
            ("CSIDriver", csi_drivers), ("CSIStorageCapacity", csi_storage_capacities)]
        for kind, objs in groups:
            for obj in objs:
                snap.upsert(kind, obj)
        for node in nodes:
            snap.upsert_node(node)
        for pod in pods:
            snap.upsert_pod(pod)
        return snap

    def copy(self) -> Snapshot:
        """An independent snapshot (for what-if work such as preemption dry runs)."""
        other = Snapshot()
        for kind, attr in {**NAMESPACED_KINDS, **CLUSTER_KINDS}.items():
            for obj in getattr(self, attr).values():
                other.upsert(kind, obj)
        for info in self._nodes.values():
            other.upsert_node(info.view.raw)
        for pod in self._pods.values():
            other._add_view(pod)
        return other

    # ---------------------------------------------------------------- nodes
    def upsert_node(self, node: Obj) -> None:
        view = NodeView.from_dict(node)
        name = view.name
        if not name:
            raise ValueError("node without metadata.name: every Node needs a name")
        info = self._nodes.get(name)
        if info is None:
            info = NodeInfo(view)
            self._nodes[name] = info
            self._join_zone(name, zone_key(view.labels))
            for pod in self._pods_by_node.get(name, {}).values():
                info.add_pod(pod)
            self.topology_epoch += 1
        else:
            if info.labels != view.labels:
                self.topology_epoch += 1
                zone = zone_key(view.labels)
                if zone != self._zone_of.get(name):
                    self._leave_zone(name)
                    self._join_zone(name, zone)
            self._unindex_node(info)
            info.set_view(view)
        self._index_node(info)
        self.node_cache.clear()
        self.generation += 1

    def remove_node(self, name: str) -> None:
        info = self._nodes.pop(name, None)
        if info is None:
            return
        self._unindex_node(info)
        self._leave_zone(name)
        self.topology_epoch += 1
        self.node_cache.clear()
        self.generation += 1

    def _join_zone(self, name: str, zone: str) -> None:
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone
        self._order = None

    def _leave_zone(self, name: str) -> None:
        zone = self._zone_of.pop(name, None)
        members = self._zones.get(zone) if zone is not None else None
        if members is not None:
            members.remove(name)
            if not members:
                del self._zones[zone]  # type: ignore[arg-type]  # found above, so not None
        self._order = None

    def _index_node(self, info: NodeInfo) -> None:
        for k, v in info.labels.items():
            self.label_index.setdefault(k, {}).setdefault(v, set()).add(info.name)
        if any(t.effect == "PreferNoSchedule" for t in info.taints):
            self.prefer_no_schedule_nodes.add(info.name)
        if any(t.effect in ("NoSchedule", "NoExecute") for t in info.taints):
            self.tainted_nodes.add(info.name)
        if info.view.unschedulable:
            self.unschedulable_nodes.add(info.name)
        if PREFER_AVOID_PODS_ANNOTATION in info.view.annotations:
            self.avoid_pods_nodes.add(info.name)
        for image in info.view.images:
            self.image_index.setdefault(image, set()).add(info.name)

    def _unindex_node(self, info: NodeInfo) -> None:
        for k, v in info.labels.items():
            values = self.label_index.get(k)
            if values is not None and v in values:
                values[v].discard(info.name)
                if not values[v]:
                    del values[v]
                if not values:
                    del self.label_index[k]
        self.prefer_no_schedule_nodes.discard(info.name)
        self.tainted_nodes.discard(info.name)
        self.unschedulable_nodes.discard(info.name)
        self.avoid_pods_nodes.discard(info.name)
        for image in info.view.images:
            holders = self.image_index.get(image)
            if holders is not None:
                holders.discard(info.name)
                if not holders:
                    del self.image_index[image]

    # ---------------------------------------------------------------- pods
    def upsert_pod(self, pod: Obj) -> None:
        uid = pod_key(pod)
        self._assumed_previous.pop(uid, None)
        self._remove_view(uid)
        self._add_view(PodView.from_dict(pod))

    def remove_pod(self, uid: str) -> None:
        self._assumed_previous.pop(uid, None)
        self._remove_view(uid)

    def assume(self, pod: Obj, node_name: str) -> None:
        """Count ``pod`` on ``node_name`` before its binding is confirmed by a watch event."""
        bound = copy.copy(dict(pod))
        bound["spec"] = {**(pod.get("spec") or {}), "nodeName": node_name}
        uid = pod_key(pod)
        previous = self._pods.get(uid)
        if uid not in self._assumed_previous:
            self._assumed_previous[uid] = previous
        self._remove_view(uid)
        # only node_name depends on spec.nodeName: the pending view (cached by the decision)
        # is reused rather than rebuilt
        self._add_view(PodView.from_dict(pod).bound(bound, node_name))

    def forget(self, pod: Obj) -> None:
        """Undo ``assume`` (the binding failed); the pod's earlier version comes back."""
        uid = pod_key(pod)
        if uid not in self._assumed_previous:
            return
        previous = self._assumed_previous.pop(uid)
        self._remove_view(uid)
        if previous is not None:
            self._add_view(previous)

    def confirm(self, pod: Obj) -> bool:
        """The watch shows an assumed pod bound: when it is bound where it was assumed and
        nothing placement reads differs from the assumed copy, the assumed view takes the
        API's object as its own (no view is rebuilt, no node total moves) and the pod is no
        longer assumed; returns whether it did. Otherwise the caller upserts the pod."""
        uid = pod_key(pod)
        view = self._pods.get(uid)
        if uid not in self._assumed_previous or view is None \
                or view.node_name != (pod.get("spec") or {}).get("nodeName") \
                or placement_view(view.raw) != placement_view(pod):
            return False
        del self._assumed_previous[uid]
        confirmed = view.bound(pod, view.node_name)
        self._pods[uid] = confirmed
        on_node = self._pods_by_node.get(view.node_name)
        if on_node is not None and uid in on_node:
            on_node[uid] = confirmed
        info = self._nodes.get(view.node_name)
        if info is not None and uid in info.pods:
            info.pods[uid] = confirmed
        for held in (self.pods_with_required_anti, self.pods_with_affinity_terms):
            if uid in held:
                held[uid] = confirmed
        return True

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed_previous

    def upsert_view(self, view: PodView) -> None:
        """``upsert_pod`` with a view already built (e.g. one taken out for a what-if)."""
        self._assumed_previous.pop(view.uid, None)
        self._remove_view(view.uid)
        self._add_view(view)

    @contextmanager
    def what_if(self) -> Iterator[WhatIf]:
        """A scope for hypothetical pod removals (preemption's dry runs): pods taken out
        through the yielded :class:`WhatIf` are back, as they were, when the scope ends, and
        the assumed-pod bookkeeping is never touched."""
        scope = WhatIf(self)
        try:
            yield scope
        finally:
            scope.restore()

    def _add_view(self, view: PodView) -> None:
        uid = view.uid
        self._pods[uid] = view
        group = view.labels.get(GROUP_LABEL)
        if group is not None:
            self._groups.setdefault((view.namespace, group), set()).add(uid)
        if not _counts_on_node(view):
            if view.nominated_node and not view.node_name \
                    and view.phase not in ("Succeeded", "Failed"):
                self.nominated_pods.setdefault(view.nominated_node, {})[uid] = view
            return
        self._pods_by_node.setdefault(view.node_name, {})[uid] = view
        info = self._nodes.get(view.node_name)
        if info is not None:
            info.add_pod(view)
        for k, v in view.labels.items():
            self.pod_label_index.setdefault(k, {}).setdefault(v, set()).add(uid)
        if self._watches:
            self._tally_watches(view, 1)
        if view.anti_required:
            self.pods_with_required_anti[uid] = view
        if view.anti_required or view.affinity_required or view.affinity_preferred \
                or view.anti_preferred:
            self.pods_with_affinity_terms[uid] = view
            self._index_terms(view, 1)
        self.generation += 1

    def _remove_view(self, uid: str) -> None:
        view = self._pods.pop(uid, None)
        if view is None:
            return
        group = view.labels.get(GROUP_LABEL)
        if group is not None:
            members = self._groups.get((view.namespace, group))
            if members is not None:
                members.discard(uid)
                if not members:
                    del self._groups[(view.namespace, group)]
        if not _counts_on_node(view):
            nominated = self.nominated_pods.get(view.nominated_node)
            if nominated is not None:
                nominated.pop(uid, None)
                if not nominated:
                    del self.nominated_pods[view.nominated_node]
            return
        on_node = self._pods_by_node.get(view.node_name)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self._pods_by_node[view.node_name]
        info = self._nodes.get(view.node_name)
        if info is not None and uid in info.pods:
            info.add_pod(view, -1)
        for k, v in view.labels.items():
            values = self.pod_label_index.get(k)
            if values is not None and v in values:
                values[v].discard(uid)
                if not values[v]:
                    del values[v]
                if not values:
                    del self.pod_label_index[k]
        if self._watches:
            self._tally_watches(view, -1)
        self.pods_with_required_anti.pop(uid, None)
        if self.pods_with_affinity_terms.pop(uid, None) is not None:
            self._index_terms(view, -1)
        self.generation += 1

    def _index_terms(self, view: PodView, sign: int) -> None:
        for kind in TERM_KINDS:
            index = self.term_index[kind]
            carriers = self._carriers[kind]
            for term in getattr(view, kind):
                by_node = index.get(term)
                if by_node is None:
                    by_node = index[term] = {}
                    self.term_anchors[kind].add(term)
                n = by_node.get(view.node_name, 0) + sign
                if n > 0:
                    by_node[view.node_name] = n
                else:
                    by_node.pop(view.node_name, None)
                    if not by_node:
                        del index[term]
                        self.term_anchors[kind].discard(term)
                        carriers.pop(term, None)
                        continue
                tally = carriers.get(term)
                if tally is not None:
                    self._tally(tally, view, sign, False)

    def _tally(self, domains: Domains, view: PodView, sign: int, deleting: bool) -> None:
        """Count (sign 1) or uncount (-1) the assigned ``view`` in ``domains`` (as being
        deleted when ``deleting``), when the tally is current and the pod's node is in one of
        its domains."""
        if domains.epoch != self.topology_epoch:
            return  # rebuilt from the pods on its next read
        value = self._domain_value(view.node_name, domains.key)
        if value is not None:
            domains.add(value, sign, deleting, self.label_index[domains.key][value])

    def _tally_watches(self, view: PodView, sign: int) -> None:
        watches, labels = self._watches, view.labels
        for term in self._watch_anchors.candidates(labels):
            if view.namespace in term.namespaces and term.selector.matches(labels):
                self._tally(watches[term], view, sign, view.deleting)

    def carrier_domains(self, term: AffinityTerm, kind: str = "anti_required") -> Domains:
        """The domains of ``term.topology_key`` holding an assigned pod that carries ``term``
        as a term of ``kind`` (one of ``TERM_KINDS``), with how many such pods each holds
        (see ``domains``; the nodes of those domains are kept for required anti-affinity
        only, the one kind a filter reads)."""
        kept = self._carriers[kind]
        domains = kept.get(term)
        if domains is not None and domains.epoch == self.topology_epoch:
            return domains
        carriers = self.term_index[kind].get(term, {})
        domains = self._counted(term.topology_key,
                                ((node, count, False) for node, count in carriers.items()),
                                keep_nodes=kind == "anti_required")
        if carriers:
            kept[term] = domains
        return domains

    def matching_domains(self, term: AffinityTerm) -> Domains:
        """The domains of ``term.topology_key`` holding an assigned pod that ``term``'s
        selector matches in ``term.namespaces`` (its ``namespace_selector`` must be None, its
        weight is not read: terms that differ by weight share one watch); watched from now on
        (see ``domains``)."""
        if term.namespace_selector is not None:
            raise ValueError("matching_domains answers for explicit namespaces only")
        if term.weight:
            term = dataclasses.replace(term, weight=0)
        domains = self._watches.get(term)
        if domains is not None and domains.epoch == self.topology_epoch:
            return domains
        if domains is None:
            if len(self._watches) >= WATCHES:
                oldest = next(iter(self._watches))
                del self._watches[oldest]
                self._watch_anchors.discard(oldest)
            self._watch_anchors.add(term)
        domains = self._watches[term] = self._counted(term.topology_key, (
            (pod.node_name, 1, pod.deleting)
            for pod in self.pods_matching(term.selector, term.namespaces)))
        return domains

    def _counted(self, key: str, counts: Iterable[tuple[str, int, bool]],
                 keep_nodes: bool = True) -> Domains:
        """A fresh tally of ``key``'s domains from (node name, pods, being deleted) counts;
        nodes the snapshot does not know, or without the key, count nowhere."""
        domains = Domains(key, self.topology_epoch, keep_nodes)
        by_value = self.label_index.get(key, {})
        for node_name, count, deleting in counts:
            value = self._domain_value(node_name, key)
            if value is not None:
                domains.add(value, count, deleting, by_value[value])
        return domains

    def own_domain(self, uid: str, term: AffinityTerm) -> tuple[PodView, str] | None:
        """The counted pod ``uid`` and its domain value, when ``term`` (selector and explicit
        namespaces) selects it: what a tally counts for the pod itself."""
        view = self._pods.get(uid)
        if view is None or not _counts_on_node(view) or view.namespace not in term.namespaces \
                or not term.selector.matches(view.labels):
            return None
        value = self._domain_value(view.node_name, term.topology_key)
        return None if value is None else (view, value)

    def _domain_value(self, node_name: str, key: str) -> str | None:
        """The domain of ``key`` that node ``node_name`` is in (None: unknown node, no key)."""
        info = self._nodes.get(node_name)
        return None if info is None else info.labels.get(key)

    # ---------------------------------------------------------------- other kinds
    def upsert(self, kind: str, obj: Obj) -> None:
        if kind == "Node":
            self.upsert_node(obj)
        elif kind == "Pod":
            self.upsert_pod(obj)
        elif kind in NAMESPACED_KINDS or kind in CLUSTER_KINDS:
            attr = NAMESPACED_KINDS.get(kind) or CLUSTER_KINDS[kind]
            key = _object_key(kind, obj)
            if (kind, key) in self._volume_api:
                # an assumed PV/PVC: only a newer version from the API server replaces it
                # (assume_cache.go, add: "Only update object if version is newer")
                if _version(obj) <= _version(getattr(self, attr)[key]):
                    return
                del self._volume_api[(kind, key)]
            getattr(self, attr)[key] = obj
            self._selectors.pop((kind, key), None)
            self.generation += 1
        elif kind in self.plugin_objects:
            self.plugin_objects[kind][key_of(obj)] = obj
        else:
            raise ValueError(f"unsupported kind {kind!r}; the snapshot holds {sorted(KINDS)}")

    def remove(self, kind: str, obj: Obj) -> None:
        if kind == "Node":
            self.remove_node(str((obj.get("metadata") or {}).get("name", "")))
        elif kind == "Pod":
            self.remove_pod(pod_key(obj))
        elif kind in NAMESPACED_KINDS or kind in CLUSTER_KINDS:
            attr = NAMESPACED_KINDS.get(kind) or CLUSTER_KINDS[kind]
            key = _object_key(kind, obj)
            self._volume_api.pop((kind, key), None)
            getattr(self, attr).pop(key, None)
            self._selectors.pop((kind, key), None)
            self.generation += 1
        elif kind in self.plugin_objects:
            self.plugin_objects[kind].pop(key_of(obj), None)
        else:
            raise ValueError(f"unsupported kind {kind!r}; the snapshot holds {sorted(KINDS)}")

    def group_members(self, namespace: str, group: str) -> list[PodView]:
        """The pods held (pending of this scheduler, bound, assumed) whose ``GROUP_LABEL``
        names ``group`` in ``namespace``: a gang's members, without a walk over every pod."""
        pods = self._pods
        return [pods[uid] for uid in self._groups.get((namespace, group), ())]

    def watch_kind(self, kind: str) -> None:
        """Hold objects of ``kind`` (one a plugin needs watched) from now on."""
        self.plugin_objects.setdefault(kind, {})

    def object(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A watched plugin object (``namespace`` "" for a cluster-scoped kind)."""
        return self.plugin_objects.get(kind, {}).get(object_key(namespace, name))

    def objects_of(self, kind: str) -> Mapping[str, Obj]:
        return self.plugin_objects.get(kind, {})

    # ---------------------------------------------------------------- assumed volumes
    def assume_volume(self, kind: str, obj: Obj) -> None:
        """VolumeBinding's Reserve: ``obj``, a PersistentVolume or PersistentVolumeClaim as this
        scheduler is about to write it (a PV's claimRef, a claim's selected-node annotation),
        stands in for the stored one, so the next decisions see the volume taken, until the
        watch brings a newer version or :meth:`restore_volume` undoes it (upstream's
        assume cache, ``pkg/scheduler/util/assumecache/assume_cache.go``, Assume). Raises
        KeyError for an object the snapshot does not hold and ValueError for one older than
        the stored version."""
        attr = CLUSTER_KINDS.get(kind) or NAMESPACED_KINDS[kind]
        key = _object_key(kind, obj)
        store: dict[str, Obj] = getattr(self, attr)
        current = store[key]
        if _version(obj) < _version(current):
            raise ValueError(f"{kind} {key!r} is out of sync (stored: "
                             f"{_version(current)}, assume: {_version(obj)})")
        self._volume_api.setdefault((kind, key), current)
        store[key] = obj
        self.generation += 1

    def restore_volume(self, kind: str, key: str) -> None:
        """Undo :meth:`assume_volume` (Unreserve): the API server's object comes back; nothing
        when the assumption is already gone (a newer version replaced it)."""
        api = self._volume_api.pop((kind, key), None)
        if api is not None:
            attr = CLUSTER_KINDS.get(kind) or NAMESPACED_KINDS[kind]
            getattr(self, attr)[key] = api
            self.generation += 1

    def api_volume(self, kind: str, key: str) -> Obj | None:
        """The API server's latest PV or PVC (never an assumed one), as GetAPIObj."""
        api = self._volume_api.get((kind, key))
        if api is not None:
            return api
        attr = CLUSTER_KINDS.get(kind) or NAMESPACED_KINDS[kind]
        found: Obj | None = getattr(self, attr).get(key)
        return found

    def is_volume_assumed(self, kind: str, key: str) -> bool:
        return (kind, key) in self._volume_api

    # ---------------------------------------------------------------- reading
    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.node_list()]

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    def node_list(self) -> list[NodeInfo]:
        """Nodes in kube-scheduler's order, the order the engine rotates through: zone by zone
        in turn, one node of each zone at a time (node_tree.go, list), so a sample of the
        first nodes spreads over the zones."""
        if self._order is None:
            zones = list(self._zones.values())
            nodes = self._nodes
            if len(zones) == 1:
                self._order = [nodes[n] for n in zones[0]]
            else:
                self._order = [nodes[n] for row in zip_longest(*zones) for n in row
                               if n is not None]
        return self._order

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def placed_pods(self) -> Iterator[PodView]:
        """Every pod counted on a node (bound or assumed)."""
        for pods in self._pods_by_node.values():
            yield from pods.values()

    def pods_on(self, node_name: str) -> list[PodView]:
        return list(self._pods_by_node.get(node_name, {}).values())

    def get_pod(self, uid: str) -> PodView | None:
        return self._pods.get(uid)

    @property
    def pods(self) -> Mapping[str, PodView]:
        return self._pods

    def assigned_pods(self) -> Iterator[PodView]:
        for on_node in self._pods_by_node.values():
            yield from on_node.values()

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.namespaces.get(namespace)
        if ns is None:
            return {}
        return {str(k): str(v) for k, v in ((ns.get("metadata") or {}).get("labels") or {}).items()}

    def priority(self, pod: PodView) -> int:
        if pod.priority is not None:
            return pod.priority
        return resolve_priority(pod.raw, self.priority_classes)

    def pods_matching(self, selector: LabelSelector, namespaces: Iterable[str] | None = None
                      ) -> list[PodView]:
        """Assigned pods matching ``selector`` (in ``namespaces`` when given), via the index."""
        if selector.matches_nothing:
            return []
        candidates: set[str] | None = None
        exact = True  # every requirement answered by the index: the candidates all match
        for r in selector.requirements:
            if r.operator == "In":
                values = self.pod_label_index.get(r.key, {})
                found: set[str] = set()
                for v in r.values:
                    found |= values.get(v, set())
            elif r.operator == "Exists":
                found = set()
                for uids in self.pod_label_index.get(r.key, {}).values():
                    found |= uids
            else:
                exact = False
                continue
            candidates = found if candidates is None else candidates & found
            if not candidates:
                return []
        ns = None if namespaces is None else set(namespaces)
        if candidates is not None and exact:
            pods = self._pods
            if ns is None:
                return [pods[u] for u in candidates]
            return [p for p in (pods[u] for u in candidates) if p.namespace in ns]
        pool: Iterable[PodView] = (self._pods[u] for u in candidates) \
            if candidates is not None else self.assigned_pods()
        return [p for p in pool if (ns is None or p.namespace in ns)
                and selector.matches(p.labels)]

    def selector_of(self, kind: str, key: str) -> LabelSelector:
        """The compiled pod selector of a Service/RC (map) or ReplicaSet/StatefulSet/PDB."""
        cached = self._selectors.get((kind, key))
        attr = NAMESPACED_KINDS[kind]
        obj = getattr(self, attr).get(key)
        if obj is None:
            return NOTHING
        if cached is not None:
            return cached
        raw = (obj.get("spec") or {}).get("selector")
        if kind in ("Service", "ReplicationController"):
            sel = selector_from_map(raw)
        else:
            sel = label_selector(raw) if raw else NOTHING
        self._selectors[(kind, key)] = sel
        return sel

    def services_of(self, pod: PodView) -> list[Obj]:
        """Services in the pod's namespace whose selector matches the pod."""
        return [svc for key, svc in self.services.items()
                if key.startswith(pod.namespace + "/")
                and self.selector_of("Service", key).matches(pod.labels)]

    def default_selector(self, pod: PodView) -> LabelSelector:
        """helper/spread.go, DefaultSelector: the requirements of every Service selecting the
        pod, plus those of its controlling ReplicationController, ReplicaSet or StatefulSet
        (found by its ownerReference, not by selector); empty when there are none."""
        requirements: list[Requirement] = []
        prefix = pod.namespace + "/"
        for key in self.services:
            if key.startswith(prefix):
                selector = self.selector_of("Service", key)
                if selector.matches(pod.labels):
                    requirements.extend(selector.requirements)
        if pod.controller is not None:
            kind, name, _ = pod.controller
            if kind in ("ReplicationController", "ReplicaSet", "StatefulSet") and \
                    prefix + name in getattr(self, NAMESPACED_KINDS[kind]):
                selector = self.selector_of(kind, prefix + name)
                if not selector.matches_nothing:
                    requirements.extend(selector.requirements)
        unique = tuple(dict.fromkeys(requirements))
        return LabelSelector(unique)

    def controller_selectors(self, pod: PodView) -> list[LabelSelector]:
        """Selectors of the services, RCs, ReplicaSets and StatefulSets that select the pod."""
        out: list[LabelSelector] = []
        prefix = pod.namespace + "/"
        for kind, attr in (("Service", "services"), ("ReplicationController",
                                                     "replication_controllers"),
                           ("ReplicaSet", "replica_sets"), ("StatefulSet", "stateful_sets")):
            for key in getattr(self, attr):
                if key.startswith(prefix):
                    sel = self.selector_of(kind, key)
                    if sel.matches(pod.labels):
                        out.append(sel)
        return out

    def __len__(self) -> int:
        return len(self._nodes)

    def describe(self) -> dict[str, Any]:
        return {"nodes": len(self._nodes), "pods": len(self._pods),
                "assigned": sum(len(p) for p in self._pods_by_node.values()),
                "assumed": len(self._assumed_previous)}
