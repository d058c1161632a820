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
  removes the claims that copy mounted and every volume naming one of them in its
  ``claimRef`` (their protection finalizers dropped: no protection controller runs here) and
  makes the scenario's own again; a new scenario removes every storage object and makes its
  own. Then it waits until the PV controller has settled them: every volume ``Available`` or
  ``Bound``, every pre-bound claim ``Bound``.

Every object carries :data:`~tests.support.volume_scenarios.VOLUME_LABEL`, so one labelled list
per kind finds them all, whatever scenario made them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
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
# kind -> collection path (all namespaces), in the order objects are made. A bound claim is
# made as a scheduler binds one: the claim first, then its volume with a claimRef carrying the
# claim's uid, which the PV controller completes at once (pkg/controller/volume/
# persistentvolume/pv_controller.go, syncVolume enqueues the claim; syncUnboundClaim binds the
# volume pre-bound to it). A claim created with spec.volumeName instead may wait for the
# controller's periodic resync (--pvclaimbinder-sync-period, 15 s) when its sync runs before
# the controller has seen the volume.
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


def _claim_key(claim: JSON) -> tuple[str, str]:
    return claim["metadata"]["namespace"], claim["metadata"]["name"]


def _claimed(volume: JSON) -> tuple[str, str] | None:
    """The claim a volume's claimRef names, if any."""
    ref = volume["spec"].get("claimRef")
    return (ref.get("namespace", ""), ref.get("name", "")) if ref else None


class Storage:
    """See the module docstring."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.volumes: Volumes | None = None
        self.dirty = True  # unknown until the first reset: whatever a former run left
        self.claims_touched: set[tuple[str, str]] = set()  # (namespace, name)
        self.provisioned = 0
        self.seconds: Counter[str] = Counter()  # by phase, for the test's report

    def use(self, volumes: Volumes | None) -> None:
        """The storage of the next scenario (None: none at all), made by the next
        :meth:`ensure`."""
        if volumes is None and self.volumes is None:
            return  # nothing made, nothing to remove (whatever an earlier run left: dirty)
        self.volumes = volumes
        self.dirty = True

    def touched(self, pod: JSON) -> None:
        """``pod``, which mounts claims, was bound (or may have been): its claims and their
        volumes are put back before the next copy."""
        if self.volumes is None:
            return
        namespace = pod["metadata"]["namespace"]
        for volume in pod["spec"].get("volumes") or ():
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                self.claims_touched.add((namespace, claim))

    async def ensure(self) -> None:
        if self.dirty:
            await self._timed("remove", self._remove_all())
            self.claims_touched.clear()
            if self.volumes is not None:
                await self._timed("create", self._create(self.volumes.objects()))
                await self._timed("settle", self._settle())
            self.dirty = False
        elif self.claims_touched:
            touched, self.claims_touched = self.claims_touched, set()
            started = time.monotonic()
            removed = await self._remove_claims(touched)
            self.seconds["remove"] += time.monotonic() - started
            assert self.volumes is not None
            await self._timed("create", self._create(
                [c for c in self.volumes.claims if _claim_key(c) in touched]
                + [v for v in self.volumes.volumes if v["metadata"]["name"] in removed]))
            await self._timed("settle", self._settle())

    async def _timed(self, phase: str, work: Any) -> None:
        started = time.monotonic()
        await work
        self.seconds[phase] += time.monotonic() - started

    async def _create(self, objects: list[JSON]) -> None:
        uids: dict[tuple[str, str], str] = {}
        for kind in PATHS:  # see PATHS for the order
            made = await asyncio.gather(*(
                self.kube.create(_collection(kind, self._with_uid(obj, uids)),
                                 self._with_uid(obj, uids))
                for obj in objects if obj["kind"] == kind))
            if kind == "PersistentVolumeClaim":
                uids.update({_claim_key(c): c["metadata"]["uid"] for c in made})

    @staticmethod
    def _with_uid(obj: JSON, uids: dict[tuple[str, str], str]) -> JSON:
        """A volume pre-bound to a claim: its claimRef with the claim's uid."""
        key = _claimed(obj) if obj["kind"] == "PersistentVolume" else None
        if key is None or key not in uids:
            return obj
        return {**obj, "spec": {**obj["spec"],
                                "claimRef": {**obj["spec"]["claimRef"], "uid": uids[key]}}}

    async def _settle(self) -> None:
        await wait_for(self._settled, timeout=60, what="the scenario's volumes settled",
                       interval=POLL)
        await asyncio.sleep(INFORMER_SETTLE)

    async def _listed(self, kind: str) -> list[JSON]:
        items, _ = await self.kube.list_all(PATHS[kind], labelSelector=SELECTOR)
        return items

    async def _remove(self, doomed: list[tuple[str, JSON]]) -> None:
        """Delete ``doomed`` (kind, object) and wait until none of them is left."""
        async def remove(kind: str, obj: JSON) -> None:
            path = _object_path(kind, obj)
            with contextlib.suppress(KubeError):
                if obj["metadata"].get("finalizers"):
                    await self.kube.patch(path, {"metadata": {"finalizers": None}})
                await self.kube.delete(path, gracePeriodSeconds=0)

        await asyncio.gather(*(remove(kind, obj) for kind, obj in doomed))
        uids = {obj["metadata"]["uid"] for _, obj in doomed}
        kinds = {kind for kind, _ in doomed}

        async def gone() -> bool:
            for kind in kinds:
                for obj in await self._listed(kind):
                    if obj["metadata"]["uid"] in uids:
                        if obj["metadata"].get("finalizers"):  # added after the first patch
                            with contextlib.suppress(KubeError):
                                await self.kube.patch(_object_path(kind, obj),
                                                      {"metadata": {"finalizers": None}})
                        return False
            return True

        await wait_for(gone, timeout=60, what="the storage objects gone", interval=POLL)

    async def _remove_all(self) -> None:
        await self._remove([(kind, obj) for kind in PATHS for obj in await self._listed(kind)])

    async def _remove_claims(self, claims: set[tuple[str, str]]) -> set[str]:
        """Remove ``claims`` and the volumes naming them; the names of those volumes."""
        volumes = [v for v in await self._listed("PersistentVolume") if _claimed(v) in claims]
        await self._remove(
            [("PersistentVolumeClaim", c) for c in await self._listed("PersistentVolumeClaim")
             if _claim_key(c) in claims] + [("PersistentVolume", v) for v in volumes])
        return {v["metadata"]["name"] for v in volumes}

    async def _settled(self) -> bool:
        """Every volume Available, or Bound with its claim Bound too."""
        wanted: set[tuple[str, str]] = set()
        for pv in await self._listed("PersistentVolume"):
            if _claimed(pv) is not None:
                wanted.add(_claimed(pv))  # type: ignore[arg-type]
            elif (pv.get("status") or {}).get("phase") != "Available":
                return False
        bound = {_claim_key(c) for c in await self._listed("PersistentVolumeClaim")
                 if (c.get("status") or {}).get("phase") == "Bound"}
        return wanted <= bound

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
