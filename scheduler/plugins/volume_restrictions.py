"""NoDiskConflict (kube-scheduler: VolumeRestrictions).

A GCE PD may be shared only if every user mounts it read-only; an AWS EBS volume never; RBD
images and iSCSI targets (same monitors/pool/image, same IQN and LUN) only read-only.

ReadWriteOncePod (volumerestrictions/volume_restrictions.go, PreFilter and
satisfyReadWriteOncePod): a claim of the pod with that access mode which a pod already placed
on a node uses rejects every node (``node(s) unavailable due to PersistentVolumeClaim with
ReadWriteOncePod access mode already in-use by another pod``; preemption may free it). A claim
that does not exist is left to VolumeBinding's PreFilter, which rejects the pod in the same
words upstream's VolumeRestrictions would.
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.foundation.keys import object_key
from berthmaster.scheduler.model import PodView, Volume
from berthmaster.scheduler.plugins.base import (
    Predicate,
    PrefilterResult,
    Status,
    unschedulable,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "NoDiskConflict"
ALIASES = ("VolumeRestrictions",)
REASON = "node(s) had no available disk"
REASON_READ_WRITE_ONCE_POD = ("node(s) unavailable due to PersistentVolumeClaim with "
                              "ReadWriteOncePod access mode already in-use by another pod")
_FAIL = unschedulable(REASON)
_FAIL_RWOP = unschedulable(REASON_READ_WRITE_ONCE_POD)
KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def conflict(a: Volume, b: Volume) -> bool:
    if a.kind != b.kind or a.ident != b.ident or a.kind not in KINDS:
        return False
    if a.kind == "awsElasticBlockStore":
        return True
    return not (a.read_only and b.read_only)


def fits(pod: PodView, node: NodeInfo) -> bool:
    mine = [v for v in pod.volumes if v.kind in KINDS]
    for other in node.pods.values():
        for theirs in other.volumes:
            if any(conflict(v, theirs) for v in mine):
                return False
    return True


def claims_in_use(pod: PodView, names: list[str], snapshot: Snapshot) -> bool:
    """Whether a pod placed on a node (the pod itself aside) uses one of ``names``, claims of
    ``pod``'s namespace (StorageInfos.IsPVCUsedByPods)."""
    wanted = set(names)
    for other in snapshot.placed_pods():
        if other.uid != pod.uid and other.namespace == pod.namespace and any(
                v.kind == "pvc" and v.ident in wanted for v in other.volumes):
            return True
    return False


def _in_use(node: NodeInfo) -> Status:
    return _FAIL_RWOP


@dataclass
class VolumeRestrictions(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Pod/Delete", "PersistentVolumeClaim/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        claims = [v.ident for v in pod.volumes if v.kind == "pvc"]
        if claims and snapshot.persistent_volume_claims is not None:
            once: list[str] = []
            for name in claims:
                pvc = snapshot.persistent_volume_claims.get(object_key(pod.namespace, name))
                if pvc is None:
                    continue  # VolumeBinding's PreFilter reports it, in the same words
                if "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or ()):
                    once.append(name)
            if once and claims_in_use(pod, once, snapshot):
                return _in_use  # Filter's status on every node, as satisfyReadWriteOncePod
        if not any(v.kind in KINDS for v in pod.volumes):
            return None

        def check(node: NodeInfo) -> Status | None:
            return None if fits(pod, node) else _FAIL

        return check
