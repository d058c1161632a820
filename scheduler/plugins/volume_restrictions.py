"""NoDiskConflict (kube-scheduler: VolumeRestrictions).

A GCE PD may be shared only if every user mounts it read-only; an AWS EBS volume never; RBD
images and iSCSI targets (same monitors/pool/image, same IQN and LUN) only read-only.
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.scheduler.model import PodView, Volume
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unschedulable
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "NoDiskConflict"
ALIASES = ("VolumeRestrictions",)
REASON = "node(s) had no available disk"
_FAIL = unschedulable(REASON)
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


@dataclass
class VolumeRestrictions(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Pod/Delete",)

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if not any(v.kind in KINDS for v in pod.volumes):
            return None

        def check(node: NodeInfo) -> Status | None:
            return None if fits(pod, node) else _FAIL

        return check
