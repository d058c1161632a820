"""MaxCSIVolumeCountPred (kube-scheduler: NodeVolumeLimits).

A node's CSINode (``storage.k8s.io/v1``, same name as the node) may give, per CSI driver, the
number of distinct volumes of that driver the node can use (``spec.drivers[].allocatable.count``).
The distinct volumes of each driver the pod would add, together with those of the pods already
on the node, must stay within it. A node without a CSINode, and a driver without a count, are
unlimited.

Design:

- a volume is identified by its driver and its handle, so a volume shared by several pods on the
  node counts once, and a volume the node already uses adds nothing;
- the pod's claims (``persistentVolumeClaim`` and generic ``ephemeral`` volumes, whose claim is
  ``<pod>-<volume>`` and must be controlled by the pod) are resolved through the snapshot: a
  claim bound to a PV with ``spec.csi`` is ``(spec.csi.driver, spec.csi.volumeHandle)``; an
  unbound claim whose StorageClass is known counts as one volume of the class's provisioner,
  unique to that claim (as upstream, so WaitForFirstConsumer claims are limited before they
  bind); a missing claim, a claim with neither, or a PV that is not CSI counts nothing (a
  missing claim is CheckVolumeBinding's to reject);
- inline ``csi`` volumes (CSI ephemeral volumes) are not counted, as upstream: they are
  mounted, not attached;
- the pod-only work (resolving the pod's own volumes) is done once in ``prefilter``; the
  per-node check reads the node's CSINode and resolves the volumes of the pods on that node.

Not modelled: CSI migration of in-tree volumes (upstream counts an in-tree EBS/GCE PD/...
volume under its CSI driver when the CSINode lists the plugin as migrated; here those stay with
MaxEBSVolumeCount & co.), and limits published as node allocatable
``attachable-volumes-csi-<driver>`` (kubelets publish CSINode counts instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.keys import key_of, object_key
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unschedulable
from berthmaster.scheduler.plugins.volume_limits import REASON
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "MaxCSIVolumeCountPred"
ALIASES = ("NodeVolumeLimits",)
_FAIL = unschedulable(REASON)

# (driver, "pv" or "claim", volume handle or namespace/claim): one attachable volume
VolumeKey = tuple[str, str, str]


def _claim_name(pod: PodView, kind: str, ident: str, volume_name: str) -> str:
    return ident if kind == "pvc" else f"{pod.name}-{volume_name}"


def _controlled_by(claim: Mapping[str, Any], pod: PodView) -> bool:
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("uid") == pod.uid:
            return True
    return False


def claim_volume(claim: Mapping[str, Any], snapshot: Snapshot) -> VolumeKey | None:
    """The CSI volume a claim stands for, or None when it counts nothing (see the docstring)."""
    spec = claim.get("spec") or {}
    pv_name = spec.get("volumeName")
    pv = snapshot.persistent_volumes.get(pv_name) if pv_name else None
    if pv is not None:
        csi = (pv.get("spec") or {}).get("csi") or {}
        driver, handle = csi.get("driver"), csi.get("volumeHandle")
        return (str(driver), "pv", str(handle)) if driver and handle else None
    # unbound, or bound to a PV the snapshot does not hold (yet): count by its class
    class_name = spec.get("storageClassName")
    storage_class = snapshot.storage_classes.get(class_name) if class_name else None
    provisioner = (storage_class or {}).get("provisioner")
    if not provisioner:
        return None
    return (str(provisioner), "claim", key_of(claim))


def csi_volumes(pod: PodView, snapshot: Snapshot) -> dict[VolumeKey, str]:
    """The distinct CSI volumes ``pod`` uses: volume -> driver."""
    out: dict[VolumeKey, str] = {}
    for v in pod.volumes:
        if v.kind not in ("pvc", "ephemeral"):
            continue
        name = _claim_name(pod, v.kind, v.ident, v.name)
        claim = snapshot.persistent_volume_claims.get(object_key(pod.namespace, name))
        if claim is None or (v.kind == "ephemeral" and not _controlled_by(claim, pod)):
            continue
        key = claim_volume(claim, snapshot)
        if key is not None:
            out[key] = key[0]
    return out


def driver_limits(csi_node: Mapping[str, Any] | None) -> dict[str, int]:
    """Driver name -> how many distinct volumes of it the node takes (drivers with a count)."""
    limits: dict[str, int] = {}
    for driver in ((csi_node or {}).get("spec") or {}).get("drivers") or ():
        count = (driver.get("allocatable") or {}).get("count")
        if driver.get("name") and count is not None:
            limits[str(driver["name"])] = int(count)
    return limits


def exceeds(mine: Mapping[VolumeKey, str], attached: Mapping[VolumeKey, str],
            limits: Mapping[str, int]) -> bool:
    """Whether adding ``mine`` to the ``attached`` volumes breaks a driver's limit."""
    adding: dict[str, int] = {}
    for key, driver in mine.items():
        if driver in limits and key not in attached:
            adding[driver] = adding.get(driver, 0) + 1
    if not adding:
        return False
    used: dict[str, int] = {}
    for driver in attached.values():
        if driver in adding:
            used[driver] = used.get(driver, 0) + 1
    return any(used.get(driver, 0) + n > limits[driver] for driver, n in adding.items())


@dataclass
class CSILimits(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    # a freed volume, a new node, or a CSINode that appears, changes or goes (limits lifted);
    # a claim that binds may turn out to share a volume already on the node
    EVENTS = ("Pod/Delete", "Node/Add", "CSINode/Add", "CSINode/Update", "CSINode/Delete",
              "PersistentVolumeClaim/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        mine = csi_volumes(pod, snapshot)
        if not mine:
            return None
        csi_nodes = snapshot.csi_nodes

        def check(node: NodeInfo) -> Status | None:
            limits = driver_limits(csi_nodes.get(node.name))
            if not any(driver in limits for driver in mine.values()):
                return None
            attached: dict[VolumeKey, str] = {}
            for other in node.pods.values():
                if other.volumes:
                    attached.update(csi_volumes(other, snapshot))
            return _FAIL if exceeds(mine, attached, limits) else None

        return check
