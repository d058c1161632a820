"""The differential harness's storage: a scenario's volumes made, kept pristine, provisioned.

Why it is needed: a pod with a WaitForFirstConsumer claim that fits is bound only after the
scheduler's PreBind wrote the claim's ``volume.kubernetes.io/selected-node`` or a static
volume's ``claimRef`` and kube-controller-manager's PV controller bound the claim
(pkg/scheduler/framework/plugins/volumebinding/binder.go, BindPodVolumes / checkBindings). So:

- **a provisioner**: the local control plane runs the PV controller (static volumes complete)
  but no provisioner. While a copy with claims waits for its outcome, :meth:`Storage.provision`
  plays the external provisioner of the scenario's CSI classes: a claim with ``selected-node``
  and no volume gets a volume of its size on that node, its ``claimRef`` naming the claim (as
  sig-storage-lib-external-provisioner does); the PV controller binds them and each scheduler's
  PreBind completes. Neither scheduler ever waits out ``bindTimeoutSeconds``.
- **a reset**: a copy that may have bound claims leaves the storage changed (claims bound,
  volumes claimed), and the next copy must find the scenario as it was. :meth:`Storage.ensure`
  removes every storage object of the scenario (their protection finalizers dropped: no
  protection controller runs here) and makes them again, then waits until the PV controller
  has settled them: every volume ``Available`` or ``Bound``, every pre-bound claim ``Bound``.

Every object carries :data:`~tests.support.volume_scenarios.VOLUME_LABEL`, so one labelled list
per kind finds them all, whatever scenario made them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from berthmaster.kube import CORE, KubeClient, KubeError, group_path, resource_path
from tests.support.volume_scenarios import (
    CSI_DRIVER,
    CSI_PLAIN,
    VOLUME_LABEL,
    Volumes,
    local_volume,
)
from tests.support.waiting import wait_for

JSON = dict[str, Any]
STORAGE = group_path("storage.k8s.io", "v1")
SELECTOR = ",".join(f"{k}={v}" for k, v in VOLUME_LABEL.items())
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONERS = (CSI_DRIVER, CSI_PLAIN)
POLL = 0.02
# the schedulers' storage informers trail the API server by a watch event: the settled objects
# are given this long to reach them before a pod is created (a pod that still finds one stale
# is compared once more, see differential.Harness.run)
INFORMER_SETTLE = 0.1
# kind -> collection path (all namespaces), in the order objects are made
PATHS = {
    "StorageClass": resource_path(STORAGE, "storageclasses"),
    "CSIDriver": resource_path(STORAGE, "csidrivers"),
    "CSINode": resource_path(STORAGE, "csinodes"),
    "CSIStorageCapacity": resource_path(STORAGE, "csistoragecapacities"),
    "PersistentVolumeClaim": resource_path(CORE, "persistentvolumeclaims"),
    "PersistentVolume": resource_path(CORE, "persistentvolumes"),
}
PLURALS = {kind: path.rsplit("/", 1)[-1] for kind, path in PATHS.items()}
GROUPS = {kind: (CORE if kind.startswith("Persistent") else STORAGE) for kind in PATHS}


def _object_path(kind: str, obj: JSON) -> str:
    meta = obj["metadata"]
    return resource_path(GROUPS[kind], PLURALS[kind], meta.get("namespace"), meta["name"])


def _collection(kind: str, obj: JSON) -> str:
    return resource_path(GROUPS[kind], PLURALS[kind], obj["metadata"].get("namespace"))


class Storage:
    """See the module docstring."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.volumes: Volumes | None = None
        self.dirty = True  # unknown until the first reset: whatever a former run left
        self.resets = 0
        self.provisioned = 0

    async def use(self, volumes: Volumes | None) -> None:
        """The storage of the next scenario (None: none at all)."""
        if volumes is None and self.volumes is None and not self.dirty:
            return
        self.volumes = volumes
        self.dirty = True
        await self.ensure()

    def touched(self) -> None:
        """A copy with claims was bound (or may have been): reset before the next one."""
        if self.volumes is not None:
            self.dirty = True

    async def ensure(self) -> None:
        if not self.dirty:
            return
        await self._remove_all()
        if self.volumes is not None:
            for group in (self.volumes.classes, self.volumes.drivers, self.volumes.csi_nodes,
                          self.volumes.capacities, self.volumes.claims, self.volumes.volumes):
                await asyncio.gather(*(self.kube.create(_collection(obj["kind"], obj), obj)
                                       for obj in group))
            await wait_for(self._settled, timeout=60, what="the scenario's volumes settled",
                           interval=POLL)
            await asyncio.sleep(INFORMER_SETTLE)
        self.dirty = False
        self.resets += 1

    async def _listed(self, kind: str) -> list[JSON]:
        items, _ = await self.kube.list_all(PATHS[kind], labelSelector=SELECTOR)
        return items

    async def _remove_all(self) -> None:
        async def remove(kind: str, obj: JSON) -> None:
            path = _object_path(kind, obj)
            with contextlib.suppress(KubeError):
                if obj["metadata"].get("finalizers"):
                    await self.kube.patch(path, {"metadata": {"finalizers": None}})
                await self.kube.delete(path, gracePeriodSeconds=0)
                # deleted while holding a finalizer added meanwhile
                await self.kube.patch(path, {"metadata": {"finalizers": None}})

        listed = {kind: await self._listed(kind) for kind in PATHS}
        await asyncio.gather(*(remove(kind, obj) for kind, items in listed.items()
                               for obj in items))

        async def gone() -> bool:
            for kind in PATHS:
                if await self._listed(kind):
                    return False
            return True

        await wait_for(gone, timeout=60, what="the previous storage objects gone",
                       interval=POLL)

    async def _settled(self) -> bool:
        for pv in await self._listed("PersistentVolume"):
            if (pv.get("status") or {}).get("phase") not in ("Available", "Bound"):
                return False
        for claim in await self._listed("PersistentVolumeClaim"):
            if claim["spec"].get("volumeName") and (
                    (claim.get("status") or {}).get("phase") != "Bound"):
                return False
        return True

    # ------------------------------------------------------------------ the provisioner
    async def provision(self) -> None:
        """Until cancelled: a volume for every claim of a CSI class that a scheduler chose a
        node for (see the module docstring)."""
        if self.volumes is None:
            return
        provisioner = {c["metadata"]["name"]: c["provisioner"] for c in self.volumes.classes}
        made: set[str] = set()
        while True:
            for claim in await self._listed("PersistentVolumeClaim"):
                meta, spec = claim["metadata"], claim["spec"]
                node = (meta.get("annotations") or {}).get(SELECTED_NODE)
                if not node or spec.get("volumeName") or meta["uid"] in made:
                    continue
                if provisioner.get(spec.get("storageClassName") or "") not in PROVISIONERS:
                    continue
                name = f"diff-prov-{meta['namespace']}-{meta['name']}"
                body = local_volume(name, spec["storageClassName"], node,
                                    spec["resources"]["requests"]["storage"], claim={
                                        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                        "namespace": meta["namespace"], "name": meta["name"],
                                        "uid": meta["uid"]})
                with contextlib.suppress(KubeError):  # made already for an earlier copy
                    await self.kube.create(PATHS["PersistentVolume"], body)
                    self.provisioned += 1
                made.add(meta["uid"])
            await asyncio.sleep(POLL * 5)
