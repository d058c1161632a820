"""The volume objects a what-if placement needs, as the autoscaler and the descheduler read them.

Design: the placement engine's default profile (kube-scheduler 1.35's) judges a pod's volumes
with VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits, which read the
PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities (VolumeBinding's storage-capacity check) of the
:class:`~berthmaster.scheduler.snapshot.Snapshot`. The scheduler daemon watches them
(``scheduler/daemon/cache.py``); the autoscaler's and the descheduler's simulations read the
same six kinds their own way — watch caches (``operator/autoscaler/watches.py``) or one LIST
each (:func:`list_volume_objects`, the descheduler's pass and the autoscaler without caches) —
as raw JSON, and hand them to ``Snapshot.build`` through :meth:`VolumeObjects.snapshot_args`.
So a pod whose claim is bound to a local volume is placed, in a simulation, only where the
volume's node affinity lets it run: as upstream cluster-autoscaler's simulator, whose
scheduler-framework snapshot holds the same objects (``cluster-autoscaler/simulator/
clustersnapshot`` and ``simulator/framework``, with VolumeBinding among the Filter plugins).

:data:`VOLUME_KINDS` is the one list of (kind, collection path, ``Snapshot.build`` argument).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path

Obj = dict[str, Any]
STORAGE_API = group_path("storage.k8s.io", "v1")

# (kind, collection path, Snapshot.build keyword)
VOLUME_KINDS: tuple[tuple[str, str, str], ...] = (
    ("PersistentVolume", resource_path(CORE, "persistentvolumes"), "persistent_volumes"),
    ("PersistentVolumeClaim", resource_path(CORE, "persistentvolumeclaims"),
     "persistent_volume_claims"),
    ("StorageClass", resource_path(STORAGE_API, "storageclasses"), "storage_classes"),
    ("CSINode", resource_path(STORAGE_API, "csinodes"), "csi_nodes"),
    ("CSIDriver", resource_path(STORAGE_API, "csidrivers"), "csi_drivers"),
    ("CSIStorageCapacity", resource_path(STORAGE_API, "csistoragecapacities"),
     "csi_storage_capacities"),
)


@dataclass(frozen=True)
class VolumeObjects:
    """The six kinds as read (raw JSON); empty when nothing was read."""

    persistent_volumes: tuple[Obj, ...] = ()
    persistent_volume_claims: tuple[Obj, ...] = ()
    storage_classes: tuple[Obj, ...] = ()
    csi_nodes: tuple[Obj, ...] = ()
    csi_drivers: tuple[Obj, ...] = ()
    csi_storage_capacities: tuple[Obj, ...] = ()

    @classmethod
    def by_kind(cls, found: Mapping[str, Iterable[Obj]]) -> VolumeObjects:
        """From ``{kind: objects}`` (the kinds of :data:`VOLUME_KINDS`; a missing kind is
        empty)."""
        return cls(**{arg: tuple(found.get(kind, ())) for kind, _, arg in VOLUME_KINDS})

    def snapshot_args(self) -> dict[str, list[Obj]]:
        """``Snapshot.build``'s keyword arguments for these objects."""
        return {arg: list(getattr(self, arg)) for _, _, arg in VOLUME_KINDS}


NO_VOLUMES = VolumeObjects()


async def list_volume_objects(kube: KubeClient) -> VolumeObjects:
    """One (paged) LIST per kind of :data:`VOLUME_KINDS`."""
    found: dict[str, list[Obj]] = {}
    for kind, path, _ in VOLUME_KINDS:
        found[kind], _ = await kube.list_all(path)
    return VolumeObjects.by_kind(found)
