"""The scheduler's cache: list+watch of every kind placement reads, applied to one Snapshot.

Design: one :class:`Informer` per kind lists the collection once (paged, raw JSON), then
watches from the list's resourceVersion, with bookmarks, for ever (each watch request times out
after a random 5 to 10 minutes, and a stream silent past the bookmark interval is dropped:
:mod:`berthmaster.foundation.kube`): a stream that ends is
re-opened from the last version seen, a ``410 Gone`` relists (the difference between what was
known and the new list becomes deletes and upserts, so nothing is missed or doubled), any other
error retries with a capped backoff. An informer that fails in any other way (an exception
nothing expected: a bug, a stream the client library refused) is restarted rather than left
dead, as client-go's reflector keeps ``ListAndWatch`` running under ``wait.BackoffUntil`` and
``HandleCrash`` (client-go ``tools/cache/reflector.go``): the failure is logged with its
traceback and counted (``on_restart``, the ``berthmaster_informer_restarts_total`` counter), the
informer reports unsynced, and after a capped backoff it relists and watches again; readiness
(``synced``) returns with that list. Informers run concurrently in the one event loop and hand
each change to :class:`ClusterCache`, which

- upserts/removes the object into the :class:`~berthmaster.scheduler.snapshot.Snapshot` (pods
  bound by any scheduler count in node usage; a pod this scheduler has assumed but whose binding
  the watch has not shown yet keeps its assumed placement),
- feeds pending pods with our ``schedulerName`` to the queue (and removes them once bound or
  deleted),
- tells the queue which cluster event happened, so parked pods that it could help are retried.

No request is ever made per pod: the watch is the only source of truth after the first list.
Pods and Nodes are trimmed on arrival to the fields placement reads (:mod:`.trim`, as
kube-scheduler's informer transform drops managedFields), so every holder of an object shares
one small dict.
Terminal pods (Succeeded/Failed) are filtered out on the server, as kube-scheduler does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.keys import key_of
from berthmaster.foundation.kube import (
    CORE,
    MIN_WATCH_TIMEOUT,
    KubeClient,
    KubeError,
    group_path,
    resource_path,
    watch_timeout_seconds,
)
from berthmaster.scheduler.daemon import hints
from berthmaster.scheduler.daemon.hints import ClusterEvent
from berthmaster.scheduler.daemon.queue import SchedulingQueue
from berthmaster.scheduler.daemon.trim import trim_node, trim_pod
from berthmaster.scheduler.framework import Watched
from berthmaster.scheduler.model import resolve_priority
from berthmaster.scheduler.pod_resources import scaled_down
from berthmaster.scheduler.snapshot import Snapshot, placement_view, pod_key

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.cache")

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
LIST_PAGE_SIZE = 500  # client-go's reflector pages its lists by 500 too
_APPS = group_path("apps", "v1")


@dataclass(frozen=True)
class Resource:
    kind: str
    path: str
    field_selector: str | None = None
    event: str = ""  # the queue's cluster event on any change ("" = none)
    # name the event by the change instead: event + "/Add", "/Update" or "/Delete"
    by_action: bool = False
    # applied to each object as it arrives, before anything stores it (see .trim)
    transform: Callable[[JSON], JSON] | None = None

    def event_for(self, change: str) -> str:
        """The queue's cluster event for one change (ADDED, MODIFIED, DELETED) of this kind."""
        if not self.event or not self.by_action:
            return self.event
        action = {ADDED: "Add", MODIFIED: "Update", DELETED: "Delete"}.get(change, "Update")
        return f"{self.event}/{action}"


RESOURCES: tuple[Resource, ...] = (
    Resource("Node", resource_path(CORE, "nodes"), transform=trim_node),
    Resource("Pod", resource_path(CORE, "pods"),
             field_selector="status.phase!=Succeeded,status.phase!=Failed", transform=trim_pod),
    Resource("Namespace", resource_path(CORE, "namespaces"), event=hints.NAMESPACE_CHANGE),
    Resource("Service", resource_path(CORE, "services"), event=hints.SERVICE_CHANGE),
    Resource("ReplicationController", resource_path(CORE, "replicationcontrollers"),
             event=hints.CONTROLLER_CHANGE),
    Resource("ReplicaSet", resource_path(_APPS, "replicasets"), event=hints.CONTROLLER_CHANGE),
    Resource("StatefulSet", resource_path(_APPS, "statefulsets"), event=hints.CONTROLLER_CHANGE),
    Resource("PodDisruptionBudget",
             resource_path(group_path("policy", "v1"), "poddisruptionbudgets"),
             event=hints.PDB_CHANGE),
    Resource("PriorityClass",
             resource_path(group_path("scheduling.k8s.io", "v1"), "priorityclasses"),
             event=hints.PRIORITY_CLASS_CHANGE),
    Resource("PersistentVolume", resource_path(CORE, "persistentvolumes"),
             event="PersistentVolume/Add"),
    Resource("PersistentVolumeClaim", resource_path(CORE, "persistentvolumeclaims"),
             event="PersistentVolumeClaim/Add"),
    Resource("StorageClass", resource_path(group_path("storage.k8s.io", "v1"),
                                           "storageclasses"), event="StorageClass/Add"),
    Resource("CSINode", resource_path(group_path("storage.k8s.io", "v1"), "csinodes"),
             event="CSINode", by_action=True),
    # VolumeBinding's storage capacity check (volumebinding/binder.go, hasEnoughCapacity)
    Resource("CSIDriver", resource_path(group_path("storage.k8s.io", "v1"), "csidrivers"),
             event="CSIDriver", by_action=True),
    Resource("CSIStorageCapacity",
             resource_path(group_path("storage.k8s.io", "v1"), "csistoragecapacities"),
             event="CSIStorageCapacity", by_action=True),
)


def plugin_resource(watched: Watched) -> Resource:
    """The informer's resource for a kind a plugin asked to have watched."""
    return Resource(watched.kind, resource_path(group_path(watched.group, watched.version),
                                                watched.plural),
                    event=watched.kind, by_action=True)


def object_key(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("uid") or key_of(obj))


def resource_version(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """List once, then watch for ever; see the module docstring."""

    def __init__(self, kube: KubeClient, resource: Resource,
                 apply: Callable[[str, str, JSON, JSON | None], None],
                 watch_timeout: int = MIN_WATCH_TIMEOUT,
                 on_restart: Callable[[str], None] | None = None):
        self.kube = kube
        self.resource = resource
        self.apply = apply  # (kind, event type, object, previous object)
        # the shortest watch; each one asks for a random timeout up to twice it (reflector.go)
        self.watch_timeout = watch_timeout
        self.on_restart = on_restart  # called with resource_name() on each restart
        self.known: dict[str, JSON] = {}
        self.version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        self.restarts = 0

    def resource_name(self) -> str:
        """The collection's plural (``pods``, ``nodes``): the metric's ``resource`` label."""
        return self.resource.path.rsplit("/", 1)[-1]

    def _params(self) -> dict[str, Any]:
        selector = self.resource.field_selector
        return {"fieldSelector": selector} if selector else {}

    async def list_objects(self) -> list[JSON]:
        transform = self.resource.transform
        if transform is None:
            # resourceVersion=0 is served from the API server's watch cache (as client-go's
            # informers list), sparing etcd a full read per relist.
            whole, self.version = await self.kube.list_all(
                self.resource.path, resourceVersion="0", **self._params())
            return whole
        # Trimmed kinds (Pods, Nodes: the big collections) are listed in pages and trimmed
        # page by page, so the whole untrimmed collection is never held at once: it set the
        # process's peak memory. (A resourceVersion=0 list ignores the limit, so these lists are
        # consistent reads, which kube-apiserver 1.35 serves from its watch cache too.)
        items: list[JSON] = []
        token: str | None = None
        while True:
            page = await self.kube.request("GET", self.resource.path, params={
                **self._params(), "limit": LIST_PAGE_SIZE, "continue": token})
            items.extend(transform(item) for item in page.get("items") or ())
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                self.version = str(meta.get("resourceVersion") or "")
                return items

    def replace(self, items: list[JSON], initial: bool) -> None:
        """Make ``known`` equal to ``items``; changes go to ``apply`` unless this is the
        initial list (which the cache builds its snapshot from in one go)."""
        fresh = {object_key(item): item for item in items}
        if not initial:
            for key, old in self.known.items():
                if key not in fresh:
                    self.apply(self.resource.kind, DELETED, old, old)
            for key, item in fresh.items():
                known = self.known.get(key)
                if known is None or resource_version(known) != resource_version(item):
                    self.apply(self.resource.kind, MODIFIED if known else ADDED, item, known)
        self.known = fresh
        self.synced.set()

    async def run(self) -> None:
        """Watch from ``version`` (set by the initial list) for ever."""
        delay = 0.5
        while True:
            try:
                if not self.version:
                    self.relists += 1
                    log.info("relisting", extra={"kind": self.resource.kind})
                    self.replace(await self.list_objects(), initial=False)
                await self._watch()
                delay = 0.5
            except KubeError as error:
                if error.gone:
                    log.info("watch expired (410 Gone); relisting",
                             extra={"kind": self.resource.kind})
                    self.version = ""
                    continue
                log.warning("watch failed; retrying", extra={"kind": self.resource.kind,
                                                             "error": str(error)})
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            except (ValueError, OSError) as error:
                # A malformed or oversized stream line: start over from a fresh list rather
                # than trust a stream that may have lost an event.
                log.warning("watch stream broken; relisting", extra={
                    "kind": self.resource.kind, "error": repr(error)})
                self.version = ""
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            except Exception as error:
                # Anything else would end the task in silence, and the cache would go stale
                # while the process looks healthy: restart, from a fresh list.
                self.restarts += 1
                self.synced.clear()
                self.version = ""
                log.error("informer failed; restarting it after a fresh list", exc_info=error,
                          extra={"kind": self.resource.kind, "delay": delay})
                if self.on_restart is not None:
                    self.on_restart(self.resource_name())
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _watch(self) -> None:
        timeout = watch_timeout_seconds(self.watch_timeout)
        async for event in self.kube.watch(self.resource.path, self.version,
                                           timeout_seconds=timeout, **self._params()):
            kind = event.get("type")
            obj = event.get("object") or {}
            version = resource_version(obj)
            if version:
                self.version = version
            if kind == BOOKMARK:
                continue
            if self.resource.transform is not None:
                obj = self.resource.transform(obj)
            key = object_key(obj)
            old = self.known.get(key)
            if kind == DELETED:
                self.known.pop(key, None)
            else:
                self.known[key] = obj
            self.apply(self.resource.kind, str(kind), obj, old)


class ClusterCache:
    """Keeps the snapshot and the queue in step with the API; see the module docstring."""

    def __init__(self, kube: KubeClient, snapshot: Snapshot, queue: SchedulingQueue,
                 scheduler_name: str | Collection[str],
                 resources: tuple[Resource, ...] = RESOURCES,
                 on_restart: Callable[[str], None] | None = None,
                 watches: Collection[Watched] = (), pending_pod_events: bool = False):
        self.kube = kube
        self.snapshot = snapshot
        self.queue = queue
        # the schedulerNames of this scheduler's profiles
        self.scheduler_names = frozenset(
            (scheduler_name,) if isinstance(scheduler_name, str) else scheduler_name)
        # the kinds the profiles' plugins asked for (framework.Watched), held in the snapshot
        # and named as cluster events "<Kind>/Add", "/Update", "/Delete"
        extra = tuple(plugin_resource(w) for w in {(w.kind, w.group): w
                                                   for w in watches}.values())
        for resource in extra:
            snapshot.watch_kind(resource.kind)
        self.resources = {r.kind: r for r in (*resources, *extra)}
        self.informers = [Informer(kube, resource, self.apply, on_restart=on_restart)
                          for resource in self.resources.values()]
        self._tasks: list[asyncio.Task[None]] = []
        self.sync_seconds = 0.0
        # a pending pod's arrival is a cluster event ("Pod/Add") only when a profile waits at
        # Permit (kube-scheduler emits EventUnscheduledPodAdd under its GangScheduling gate:
        # eventhandlers.go, addPodToSchedulingQueue); otherwise it would only cost
        self.pending_pod_events = pending_pod_events
        # a deleted pod's uid: a pod waiting at Permit is rejected at once (eventhandlers.go,
        # deletePodFromSchedulingQueue: RejectWaitingPod)
        self.on_pod_deleted: Callable[[str], object] | None = None

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    async def start(self) -> None:
        """List everything (concurrently), load it, then start the watches."""
        started = time.perf_counter()
        lists = await asyncio.gather(*(self._first_list(informer)
                                       for informer in self.informers))
        order = {"Namespace": 0, "PriorityClass": 1, "Node": 8, "Pod": 9}
        ordered = sorted(zip(self.informers, lists, strict=True),
                         key=lambda pair: order.get(pair[0].resource.kind, 2))
        for informer, items in ordered:
            for item in items:
                self.apply(informer.resource.kind, ADDED, item, None, initial=True)
            informer.replace(items, initial=True)
        self.sync_seconds = time.perf_counter() - started
        log.info("caches synced", extra={"seconds": round(self.sync_seconds, 3),
                                         **self.snapshot.describe()})
        self._tasks = [asyncio.create_task(informer.run(), name=f"watch-{informer.resource.kind}")
                       for informer in self.informers]

    @staticmethod
    async def _first_list(informer: Informer) -> list[JSON]:
        """The initial list, retried with a capped backoff (as client-go's reflector retries
        ListAndWatch) so a slow or restarting API server delays the start instead of ending
        the process."""
        delay = 0.5
        while True:
            try:
                return await informer.list_objects()
            except KubeError as error:
                log.warning("initial list failed; retrying", extra={
                    "kind": informer.resource.kind, "error": str(error), "delay": delay})
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- applying one change --------------------------------------------------------------
    def priority(self, pod: JSON) -> int:
        return resolve_priority(pod, self.snapshot.priority_classes)

    def ours(self, pod: JSON) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") in self.scheduler_names

    def apply(self, kind: str, event: str, obj: JSON, old: JSON | None,
              initial: bool = False) -> None:
        """Apply one change; an object the snapshot cannot read is logged and skipped, so
        one bad object never stops the watch that carries everything else."""
        try:
            self._apply(kind, event, obj, old, initial)
        except Exception as error:
            meta = obj.get("metadata") or {}
            log.error("cannot apply change", extra={
                "kind": kind, "event": event, "object": f"{meta.get('namespace', '')}/"
                f"{meta.get('name', '')}", "error": repr(error)})

    def _apply(self, kind: str, event: str, obj: JSON, old: JSON | None,
               initial: bool) -> None:
        if kind == "Pod":
            self._apply_pod(event, obj, old, initial)
        elif kind == "Node":
            self._apply_node(event, obj, old, initial)
        else:
            if event == DELETED:
                self.snapshot.remove(kind, obj)
            else:
                self.snapshot.upsert(kind, obj)
            resource = self.resources[kind]
            if resource.event and not initial:
                self.queue.move_for_event(ClusterEvent(resource.event_for(event)))

    def _apply_node(self, event: str, node: JSON, old: JSON | None, initial: bool) -> None:
        if event == DELETED:
            self.snapshot.remove_node(str((node.get("metadata") or {}).get("name", "")))
            return
        if old is not None and event != ADDED:
            changes = hints.node_change(old, node)
            if not changes:
                return  # a heartbeat: placement reads nothing that changed
            self.snapshot.upsert_node(node)
            self.queue.move_for_event(ClusterEvent(hints.NODE_UPDATE, changes, node))
            return
        self.snapshot.upsert_node(node)
        if not initial:
            self.queue.move_for_event(ClusterEvent(hints.NODE_ADD))

    def _apply_pod(self, event: str, pod: JSON, old: JSON | None, initial: bool) -> None:
        uid = pod_key(pod)
        spec = pod.get("spec") or {}
        key = key_of(pod)
        if event == DELETED:
            was_assigned = bool(((old or pod).get("spec") or {}).get("nodeName")) or \
                self.snapshot.is_assumed(uid)
            self.snapshot.remove_pod(uid)
            self.queue.delete(key)
            if self.on_pod_deleted is not None:
                self.on_pod_deleted(uid)
            if was_assigned and not initial:
                self.queue.move_for_event(ClusterEvent(hints.ASSIGNED_POD_DELETE))
            return
        if spec.get("nodeName"):
            assumed = self.snapshot.is_assumed(uid)
            if old is not None and not assumed and placement_view(old) == placement_view(pod):
                return  # kubelet/kwok status churn: nothing placement reads has changed
            if not (assumed and self.snapshot.confirm(pod)):
                self.snapshot.upsert_pod(pod)  # replaces an assumed placement with the real one
            self.queue.delete(key)
            if initial:
                return
            old_node = ((old or {}).get("spec") or {}).get("nodeName")
            if not old_node:
                self.queue.move_for_event(ClusterEvent(hints.ASSIGNED_POD_ADD))
                return
            assert old is not None
            if (old.get("metadata") or {}).get("labels") != (
                    pod.get("metadata") or {}).get("labels"):
                self.queue.move_for_event(ClusterEvent(hints.ASSIGNED_POD_UPDATE))
            if scaled_down(old, pod):
                self.queue.move_for_event(ClusterEvent(hints.POD_SCALE_DOWN, pods=(old, pod)))
            return
        if self.snapshot.is_assumed(uid):
            # Our binding is in flight or done but not yet seen: keep the assumed placement,
            # and never queue the pod again.
            return
        if not self.ours(pod):
            return  # another scheduler's pending pod uses nothing until it is bound
        self.snapshot.upsert_pod(pod)
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self.queue.delete(key)
            return
        new = key not in self.queue
        self.queue.add(pod, self.priority(pod))
        if new and not initial and self.pending_pod_events:
            # a sibling of a gang may be what a parked pod waits for (Coscheduling's
            # "Pod/Add"; eventhandlers.go addPodToSchedulingQueue)
            self.queue.move_for_event(ClusterEvent(hints.UNSCHEDULED_POD_ADD))
