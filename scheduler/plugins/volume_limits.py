"""MaxEBSVolumeCount, MaxGCEPDVolumeCount, MaxAzureDiskVolumeCount, MaxCinderVolumeCount.

The distinct volumes of one kind attached to a node (the pod's plus those of the pods already
there, counting claims bound to such volumes) must stay within the node's limit: its
``attachable-volumes-<kind>`` allocatable when set, else the cloud's default (EBS 39, GCE PD 16,
Azure Disk 16, Cinder 256).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unschedulable
from berthmaster.scheduler.plugins.volume_zone import bound_volume
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

REASON = "node(s) exceed max volume count"
_FAIL = unschedulable(REASON)
PV_SOURCES = {"awsElasticBlockStore": "volumeID", "gcePersistentDisk": "pdName",
              "azureDisk": "diskName", "cinder": "volumeID"}


def volume_ids(pod: PodView, kind: str, snapshot: Snapshot) -> set[str]:
    ids = set()
    for v in pod.volumes:
        if v.kind == kind:
            ids.add(v.ident)
        elif v.kind == "pvc":
            pv = bound_volume(snapshot, pod.namespace, v.ident)
            source = ((pv or {}).get("spec") or {}).get(kind)
            if source is not None:
                ids.add(str(source.get(PV_SOURCES[kind], "")))
    return ids


@dataclass
class _VolumeLimit(Predicate):
    KIND: ClassVar[str] = ""
    RESOURCE: ClassVar[str] = ""
    DEFAULT: ClassVar[int] = 0
    EVENTS = ("Pod/Delete", "Node/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        mine = volume_ids(pod, self.KIND, snapshot)
        if not mine:
            return None
        kind, resource, default = self.KIND, self.RESOURCE, self.DEFAULT

        def check(node: NodeInfo) -> Status | None:
            used: set[str] = set()
            for other in node.pods.values():
                if other.volumes:
                    used |= volume_ids(other, kind, snapshot)
            limit = node.allocatable.get(resource, default)
            return _FAIL if len(used | mine) > limit else None

        return check


@dataclass
class EBSLimits(_VolumeLimit):
    NAME = "MaxEBSVolumeCount"
    ALIASES = ("EBSLimits",)
    KIND = "awsElasticBlockStore"
    RESOURCE = "attachable-volumes-aws-ebs"
    DEFAULT = 39


@dataclass
class GCEPDLimits(_VolumeLimit):
    NAME = "MaxGCEPDVolumeCount"
    ALIASES = ("GCEPDLimits",)
    KIND = "gcePersistentDisk"
    RESOURCE = "attachable-volumes-gce-pd"
    DEFAULT = 16


@dataclass
class AzureDiskLimits(_VolumeLimit):
    NAME = "MaxAzureDiskVolumeCount"
    ALIASES = ("AzureDiskLimits",)
    KIND = "azureDisk"
    RESOURCE = "attachable-volumes-azure-disk"
    DEFAULT = 16


@dataclass
class CinderLimits(_VolumeLimit):
    NAME = "MaxCinderVolumeCount"
    ALIASES = ("CinderLimits",)
    KIND = "cinder"
    RESOURCE = "attachable-volumes-cinder"
    DEFAULT = 256
