"""The autoscaler's watch caches: each loop reads the cluster from memory, not from LISTs.

Design: upstream's cluster-autoscaler reads every kind through client-go listers (informers),
and so do we, with the scheduler's :class:`~berthmaster.scheduler.daemon.cache.Informer` (the
project's one list+watch): per kind one paged LIST served from the API server's watch cache
(``resourceVersion=0``), then a WATCH from that list's resourceVersion with bookmarks; a stream
that ends is re-opened from the last version seen, ``410 Gone`` relists, any other error backs
off (capped) and retries. At rest the autoscaler so costs one open watch per kind, re-opened
every five minutes, instead of twelve LISTs (every pod in the cluster among them) every 10 s.
The kinds: nodes, pods, PDBs, PriorityClasses, MachineSets, Machines, and the volume objects of
``berthmaster.scheduler.volume_objects`` (PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities), which the placement engine's
volume filters read. PodGroups (the gangs the loop keeps whole) have an optional CRD: they are
LISTed each loop until the API server serves them, then watched like the rest
(:meth:`WatchedCluster.pod_groups`).

What runs when: the caches start on the first loop that reads them (an operator without a
ClusterAutoscaler watches nothing more) and run until the operator stops (:meth:`stop`, before
the shared client closes). A loop waits for a kind's first sync, at most ``sync_timeout``
seconds, then fails like a failed LIST (:class:`KubeError`; the next loop tries again). A loop
reads the objects as the watch has delivered them so far: its own writes of the previous loop
arrive within the watch's delivery delay, as with upstream's listers, and every decision is made
again from the newer state on the next loop. The cached objects are shared between loops; the
loop never changes them (the simulation works on copies).

Terminal pods (Succeeded/Failed) are filtered out on the server, as the LIST did; each pod is
trimmed on arrival to what the loop reads (:mod:`.trim`), listed page by page, so the cache's
size per pod is bounded whatever the pods carry. The Priority
expander's ConfigMap is watched by name (a field selector) in the operator's namespace only
(``namespace``; upstream's ConfigMap lister is namespaced the same way), once a configuration
asks for it.

An informer that fails unexpectedly restarts itself (see the Informer): each restart counts in
``berthmaster_informer_restarts_total{resource}`` on the operator's registry, and the operator's
``/readyz`` (:meth:`WatchedCluster.ready`, registered with :mod:`berthmaster.operator.health`)
fails until the restarted informer has listed again. An informer still on its first list does
not count: the caches start with the first loop, after the operator became ready.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import Counter

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.autoscaler.config import DEFAULT_NAMESPACE, AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import CONTROLLER_KINDS, controllers_of
from berthmaster.operator.autoscaler.expanders import PRIORITY_CONFIGMAP
from berthmaster.operator.autoscaler.observe import (
    ACTIVE_PODS,
    MACHINE_API,
    POD_GROUPS_API,
    POLICY_API,
    SCHEDULING_API,
    list_pod_groups,
)
from berthmaster.operator.autoscaler.state import ClusterState
from berthmaster.operator.autoscaler.trim import trim_pod
from berthmaster.scheduler.daemon.cache import Informer, Resource
from berthmaster.scheduler.volume_objects import VOLUME_KINDS, VolumeObjects

JSON = dict[str, Any]
SYNC_TIMEOUT = 60.0

informer_restarts_total = Counter(
    "berthmaster_informer_restarts", "Number of times an informer was restarted after an "
    "unexpected failure, by resource.", ["resource"])

NODES = Resource("Node", resource_path(CORE, "nodes"))
PODS = Resource("Pod", resource_path(CORE, "pods"), field_selector=ACTIVE_PODS,
                transform=trim_pod)
PDBS = Resource("PodDisruptionBudget", resource_path(POLICY_API, "poddisruptionbudgets"))
PRIORITY_CLASSES = Resource("PriorityClass", resource_path(SCHEDULING_API, "priorityclasses"))
MACHINE_SETS = Resource("MachineSet", resource_path(MACHINE_API, "machinesets"))
MACHINES = Resource("Machine", resource_path(MACHINE_API, "machines"))
VOLUMES = tuple(Resource(kind, path) for kind, path, _ in VOLUME_KINDS)
POD_GROUPS = Resource("PodGroup", resource_path(POD_GROUPS_API, "podgroups"))


def _identity(obj: JSON) -> JSON:
    """Only what ControllerNotFound reads: a controller's namespace and name."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")
                         if k in meta}}


CONTROLLERS = tuple(Resource(kind, resource_path(api_path, plural), transform=_identity)
                    for kind, (api_path, plural) in CONTROLLER_KINDS.items())


def priority_expander_configmap(namespace: str) -> Resource:
    """The Priority expander's ConfigMap, by name, in ``namespace`` alone."""
    return Resource("ConfigMap", resource_path(CORE, "configmaps", namespace),
                    field_selector=f"metadata.name={PRIORITY_CONFIGMAP}")


def _ignore(kind: str, event: str, obj: JSON, old: JSON | None) -> None:
    """The loop reads the informers' objects when it runs; no change needs handling at once."""


class WatchedCluster:
    """The autoscaler's informers, started on first use; see the module docstring."""

    def __init__(self, kube: KubeClient, sync_timeout: float = SYNC_TIMEOUT,
                 watch_timeout: int = 300, namespace: str = DEFAULT_NAMESPACE):
        self.kube = kube
        self.namespace = namespace
        self.sync_timeout = sync_timeout
        self.watch_timeout = watch_timeout
        self.informers: dict[str, Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []

    @staticmethod
    def _key(resource: Resource) -> str:
        return f"{resource.path}?{resource.field_selector or ''}"

    def _informer(self, resource: Resource) -> Informer:
        key = self._key(resource)
        informer = self.informers.get(key)
        if informer is None:
            informer = self.informers[key] = Informer(
                self.kube, resource, _ignore, watch_timeout=self.watch_timeout,
                on_restart=lambda name: informer_restarts_total.labels(name).inc())
            # run() lists first (the version is still empty), then watches for ever
            self._tasks.append(asyncio.create_task(
                informer.run(), name=f"autoscaler-watch-{resource.kind}"))
        return informer

    def ready(self) -> tuple[bool, str]:
        """Not ready while a restarted informer has not listed again (see the module
        docstring)."""
        waiting = sorted(informer.resource_name() for informer in self.informers.values()
                         if informer.restarts and not informer.synced.is_set())
        if waiting:
            return False, (f"the autoscaler's {', '.join(waiting)} informer restarted and has "
                           "not listed again")
        return True, "ok"

    async def items(self, resource: Resource) -> list[JSON]:
        """The cached objects of one kind, after its first sync."""
        informer = self._informer(resource)
        if not informer.synced.is_set():
            try:
                await asyncio.wait_for(informer.synced.wait(), self.sync_timeout)
            except TimeoutError:
                raise KubeError(0, "NotSynced", f"the {resource.kind} watch cache has not "
                                f"synced in {self.sync_timeout:g} s") from None
        return list(informer.known.values())

    async def pod_groups(self) -> list[JSON]:
        """The PodGroups: from their watch once the API server was seen serving them, until
        then one LIST a loop (none while their CRD is not installed)."""
        if self._key(POD_GROUPS) in self.informers:
            return await self.items(POD_GROUPS)
        groups = await list_pod_groups(self.kube)
        if groups is None:
            return []
        self._informer(POD_GROUPS)  # served: watched from the next loop on
        return groups

    async def read(self, config: AutoscalerConfig) -> ClusterState:
        """What one loop decides on (the watch-cache twin of ``loop.read_cluster``)."""
        kinds = [NODES, PODS, PDBS, PRIORITY_CLASSES, MACHINE_SETS, MACHINES, *VOLUMES,
                 *CONTROLLERS]
        if "Priority" in config.expanders:
            kinds.append(priority_expander_configmap(self.namespace))
        for resource in kinds:  # start every watch before waiting on any
            self._informer(resource)
        nodes, pods, pdbs, classes, machine_sets, machines, *rest = [
            await self.items(resource) for resource in kinds]
        volumes = VolumeObjects.by_kind({r.kind: items for r, items in zip(
            VOLUMES, rest[:len(VOLUMES)], strict=True)})
        rest = rest[len(VOLUMES):]
        controllers = controllers_of({r.kind: items for r, items in zip(
            CONTROLLERS, rest[:len(CONTROLLERS)], strict=True)})
        configmaps = rest[len(CONTROLLERS):]
        found = configmaps[0] if configmaps else []
        return ClusterState(nodes, pods, pdbs, {c["metadata"]["name"]: c for c in classes},
                            machine_sets, machines, found[0] if found else None, volumes,
                            controllers, await self.pod_groups())

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.informers = {}
