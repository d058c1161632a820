"""NoVolumeZoneConflict (kube-scheduler: VolumeZone).

A pod whose bound claims use persistent volumes labelled with a zone or region can only run on
nodes in one of those zones/regions (a label value may list several, separated by ``__``).
Unbound claims are left to CheckVolumeBinding.
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.foundation.keys import object_key
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unresolvable
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "NoVolumeZoneConflict"
ALIASES = ("VolumeZone",)
REASON = "node(s) had no available volume zone"
_FAIL = unresolvable(REASON)
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                   "failure-domain.beta.kubernetes.io/zone",
                   "failure-domain.beta.kubernetes.io/region")


def bound_volume(snapshot: Snapshot, namespace: str, claim: str) -> dict | None:  # type: ignore[type-arg]
    pvc = snapshot.persistent_volume_claims.get(object_key(namespace, claim))
    if pvc is None:
        return None
    name = (pvc.get("spec") or {}).get("volumeName")
    pv = snapshot.persistent_volumes.get(name) if name else None
    return dict(pv) if pv is not None else None


def volume_constraints(pod: PodView, snapshot: Snapshot) -> list[tuple[str, frozenset[str]]]:
    out = []
    for v in pod.volumes:
        if v.kind != "pvc":
            continue
        pv = bound_volume(snapshot, pod.namespace, v.ident)
        if pv is None:
            continue
        labels = (pv.get("metadata") or {}).get("labels") or {}
        for key in TOPOLOGY_LABELS:
            if key in labels:
                out.append((key, frozenset(str(labels[key]).split("__"))))
    return out


@dataclass
class VolumeZone(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add", "Node/UpdateNodeLabel", "PersistentVolumeClaim/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        constraints = volume_constraints(pod, snapshot)
        if not constraints:
            return None

        def check(node: NodeInfo) -> Status | None:
            labels = node.labels
            for key, allowed in constraints:
                # a node without any topology label is not constrained (as upstream)
                if key in labels and labels[key] not in allowed:
                    return _FAIL
            return None

        return check
