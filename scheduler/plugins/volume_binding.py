"""CheckVolumeBinding (kube-scheduler: VolumeBinding).

Bound claims: the volume's ``spec.nodeAffinity.required`` must match the node. Unbound claims
of a ``WaitForFirstConsumer`` class: some available volume of that class, large enough, with
the access modes asked and node affinity matching the node, must exist, unless the class can
provision dynamically. An unbound claim with immediate binding, or a missing claim, rejects the
pod on every node before any node is looked at (as upstream's PreFilter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.scheduler.model import (
    NodeSelector,
    PodView,
    node_selector_term,
    parse_quantity,
)
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unresolvable
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "CheckVolumeBinding"
ALIASES = ("VolumeBinding",)
REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
REASON_CLAIM_NOT_FOUND = 'persistentvolumeclaim "%s" not found'
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_FAIL_NODE = unresolvable(REASON_NODE_CONFLICT)
_FAIL_BIND = unresolvable(REASON_BIND_CONFLICT)


def volume_node_selector(pv: Mapping[str, Any]) -> NodeSelector | None:
    required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required"))
    if required is None:
        return None
    return NodeSelector(tuple(node_selector_term(t) for t in
                              required.get("nodeSelectorTerms") or ()))


def _storage(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for p in path:
        cur = (cur or {}).get(p)
    return parse_quantity(cur) if cur is not None else 0


def _candidate_volumes(pvc: Mapping[str, Any], snapshot: Snapshot) -> list[Mapping[str, Any]]:
    spec = pvc.get("spec") or {}
    cls = spec.get("storageClassName") or ""
    want = _storage(spec, ("resources", "requests", "storage"))
    modes = set(spec.get("accessModes") or ())
    out = []
    for pv in snapshot.persistent_volumes.values():
        pspec = pv.get("spec") or {}
        if (pspec.get("storageClassName") or "") != cls or pspec.get("claimRef"):
            continue
        if ((pv.get("status") or {}).get("phase") or "Available") != "Available":
            continue
        if _storage(pspec, ("capacity", "storage")) < want:
            continue
        if not modes <= set(pspec.get("accessModes") or ()):
            continue
        out.append(pv)
    return out


@dataclass
class VolumeBinding(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("PersistentVolume/Add", "PersistentVolumeClaim/Add", "StorageClass/Add",
              "Node/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        bound: list[NodeSelector] = []
        waiting: list[list[NodeSelector | None]] = []
        for v in pod.volumes:
            if v.kind != "pvc":
                continue
            pvc = snapshot.persistent_volume_claims.get(f"{pod.namespace}/{v.ident}")
            if pvc is None:
                return unresolvable(REASON_CLAIM_NOT_FOUND % v.ident)
            volume_name = (pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                pv = snapshot.persistent_volumes.get(volume_name)
                sel = volume_node_selector(pv) if pv is not None else None
                if sel is not None:
                    bound.append(sel)
                continue
            cls_name = (pvc.get("spec") or {}).get("storageClassName") or ""
            cls = snapshot.storage_classes.get(cls_name) or {}
            if cls.get("volumeBindingMode") != "WaitForFirstConsumer":
                return unresolvable(REASON_UNBOUND_IMMEDIATE)
            if cls.get("provisioner") and cls.get("provisioner") != NO_PROVISIONER:
                continue
            waiting.append([volume_node_selector(pv) for pv in _candidate_volumes(pvc, snapshot)])
        if not bound and not waiting:
            return None

        def check(node: NodeInfo) -> Status | None:
            for sel in bound:
                if not sel.matches(node.name, node.labels):
                    return _FAIL_NODE
            for options in waiting:
                if not any(s is None or s.matches(node.name, node.labels) for s in options):
                    return _FAIL_BIND
            return None

        return check
