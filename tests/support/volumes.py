"""Local volumes pinned to a node, on the real API server, for integration tests.

:class:`PinnedVolumes` makes, per test, a StorageClass of the local kind (no provisioner,
``WaitForFirstConsumer``) and for each :meth:`~PinnedVolumes.claim_on` a PersistentVolume with
required node affinity to one node (``kubernetes.io/hostname``) pre-bound to a new claim, and
waits until the control plane's PV controller has bound the two (claim phase ``Bound``, its
``pv.kubernetes.io/bind-completed`` annotation). It also makes Available pinned volumes
(:meth:`~PinnedVolumes.available_on`), unbound claims (:meth:`~PinnedVolumes.pending_claim`)
and a StorageClass with a provisioner (:meth:`~PinnedVolumes.provisioning_class`).
:meth:`~PinnedVolumes.remove_all` deletes what it made, lifting the protection finalizers no
controller here removes.
"""

from __future__ import annotations

import contextlib
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from tests.support.builders import for_create, make_claim, make_storage_class, make_volume
from tests.support.waiting import wait_for

STORAGE = group_path("storage.k8s.io", "v1")


class PinnedVolumes:
    def __init__(self, kube: KubeClient, namespace: str):
        self.kube = kube
        self.namespace = namespace
        self.storage_class = f"local-{namespace}"
        self.made: list[str] = []

    async def _local_class(self) -> None:
        path = resource_path(STORAGE, "storageclasses", name=self.storage_class)
        if path not in self.made:
            await self.kube.create(resource_path(STORAGE, "storageclasses"),
                                   make_storage_class(self.storage_class))
            self.made.append(path)

    async def provisioning_class(self, provisioner: str) -> str:
        """A ``WaitForFirstConsumer`` StorageClass with ``provisioner``; its name."""
        name = f"dynamic-{self.namespace}"
        await self.kube.create(resource_path(STORAGE, "storageclasses"),
                               make_storage_class(name, provisioner))
        self.made.append(resource_path(STORAGE, "storageclasses", name=name))
        return name

    async def pending_claim(self, claim: str, storage_class: str | None = None) -> None:
        """An unbound claim of ``storage_class`` (default: the local class)."""
        if storage_class is None:
            await self._local_class()
        body = for_create(make_claim(claim, self.namespace,
                                     storage_class=storage_class or self.storage_class))
        await self.kube.create(resource_path(CORE, "persistentvolumeclaims", self.namespace),
                               body)
        self.made.append(resource_path(CORE, "persistentvolumeclaims", self.namespace, claim))

    async def available_on(self, volume: str, node: str) -> None:
        """An Available local volume of the local class pinned to ``node``, bound to nothing."""
        await self._local_class()
        name = f"{self.namespace}-{volume}"
        await self.kube.create(resource_path(CORE, "persistentvolumes"), for_create(
            make_volume(name, node=node, storage_class=self.storage_class)))
        self.made.append(resource_path(CORE, "persistentvolumes", name=name))

    async def claim_on(self, claim: str, node: str) -> dict[str, Any]:
        """A claim ``claim`` bound to a new local volume pinned to ``node``; the bound claim."""
        await self._local_class()
        volume = f"{self.namespace}-{claim}"
        body = for_create(make_claim(claim, self.namespace, storage_class=self.storage_class,
                                     volume=volume))
        # the PV controller binds it and writes bind-completed itself (pv_controller.go)
        body["metadata"].pop("annotations", None)
        claim_path = resource_path(CORE, "persistentvolumeclaims", self.namespace, claim)
        await self.kube.create(resource_path(CORE, "persistentvolumeclaims", self.namespace),
                               body)
        self.made.append(claim_path)
        await self.kube.create(resource_path(CORE, "persistentvolumes"), for_create(make_volume(
            volume, node=node, storage_class=self.storage_class,
            claim=(self.namespace, claim))))
        self.made.append(resource_path(CORE, "persistentvolumes", name=volume))

        async def bound() -> dict[str, Any] | None:
            found = await self.kube.get(claim_path)
            done = "pv.kubernetes.io/bind-completed" in (
                found["metadata"].get("annotations") or {})
            return found if done and found.get("status", {}).get("phase") == "Bound" else None

        return await wait_for(bound, timeout=60, what=f"claim {claim} bound to {volume}")

    async def remove_all(self) -> None:
        for path in reversed(self.made):
            with contextlib.suppress(KubeError):
                await self.kube.patch(path, {"metadata": {"finalizers": None}})
            with contextlib.suppress(KubeError):
                await self.kube.delete(path)
        self.made = []
