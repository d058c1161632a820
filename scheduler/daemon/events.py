"""What users see with ``kubectl describe pod``: Events and the PodScheduled condition.

Design: the objects are built by pure functions (:func:`build_event`,
:func:`unschedulable_status_patch`, ...) with kube-scheduler's exact reasons and messages;
:class:`EventRecorder` posts them from a few background tasks through a bounded queue, so a slow
API server never stalls the scheduling loop (when the queue is full an event is dropped and counted,
as client-go's broadcaster does). Repeats of the same (object, reason, message) within ten
minutes bump ``count``/``lastTimestamp`` on the existing Event instead of creating a new one,
as client-go's event correlator does, so a pod retried every few seconds leaves one
FailedScheduling Event, not hundreds.

Events are core/v1 with ``source.component`` and ``reportingComponent`` set to the scheduler
name (``berthmaster`` by default) and ``reportingInstance`` to this replica's identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.events import core_event, object_reference
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.times import format_rfc3339

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.events")

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"  # PodReasonSchedulerError: a failure that is not a misfit
_CORRELATION_WINDOW = 600.0


def now_rfc3339() -> str:
    return format_rfc3339(datetime.now(UTC))


def scheduled_message(pod: JSON, node: str) -> str:
    meta = pod.get("metadata") or {}
    return f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}"


def preempted_message(preemptor: JSON, node: str) -> str:
    return f"Preempted by pod {(preemptor.get('metadata') or {}).get('uid', '')} on node {node}"


def involved(obj: JSON) -> JSON:
    meta = obj.get("metadata") or {}
    ref = {**object_reference(obj), "apiVersion": "v1", "kind": "Pod"}  # always a pod
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def build_event(
    obj: JSON, event_type: str, reason: str, message: str, component: str, instance: str,
    action: str, related: JSON | None = None,
) -> JSON:
    """A core/v1 Event about ``obj`` (a pod)."""
    ref = involved(obj)
    return core_event(ref, name=f"{ref['name']}.{uuid.uuid4().hex[:16]}",
                      namespace=ref["namespace"], reason=reason, message=message[:1024],
                      event_type=event_type, component=component, instance=instance[:128],
                      now=datetime.now(UTC), action=action,
                      related=None if related is None else involved(related))


def unschedulable_status_patch(message: str, reason: str = UNSCHEDULABLE,
                               nominated_node: str | None = None) -> JSON:
    """A strategic-merge patch of pods/status: PodScheduled False with the engine's message."""
    status: JSON = {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
        "lastProbeTime": None, "lastTransitionTime": now_rfc3339(),
    }]}
    if nominated_node is not None:
        # "" clears it: null removes the field in a strategic-merge patch
        status["nominatedNodeName"] = nominated_node or None
    return {"status": status}


def disruption_target_patch(scheduler: str) -> JSON:
    """The victim's DisruptionTarget condition, set before it is deleted (as upstream)."""
    return {"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": f"{scheduler}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now_rfc3339(),
    }]}}


class EventRecorder:
    """Posts Events and status patches in the background, in order, never blocking the caller."""

    def __init__(self, kube: KubeClient, component: str, instance: str, capacity: int = 10_000,
                 profiles: Collection[str] = (), may_act: Callable[[], bool] | None = None):
        self.kube = kube
        # the fence of every pod status patch (leader.py): a deposed replica changes no pod
        self.may_act = may_act
        self.component = component
        # a pod's Events name its profile as their source, as upstream's per-profile recorders
        # (profile.NewMap: one EventRecorder per schedulerName)
        self.profiles = frozenset(profiles)
        self.instance = instance
        self._queue: asyncio.Queue[tuple[str, JSON, JSON | None, Callable[[], bool] | None]] = (
            asyncio.Queue(capacity))
        self._seen: dict[tuple[str, str, str], tuple[str, str, int, float]] = {}
        self.dropped = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, workers: int = 4) -> None:
        self._tasks = [asyncio.create_task(self._work(), name=f"events-{i}")
                       for i in range(workers)]

    async def stop(self, drain_seconds: float = 2.0) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), timeout=drain_seconds)
        for task in self._tasks:
            task.cancel()

    def _put(self, item: tuple[str, JSON, JSON | None, Callable[[], bool] | None]) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1

    def event(self, obj: JSON, event_type: str, reason: str, message: str, action: str,
              related: JSON | None = None) -> None:
        component = self.component
        if self.profiles:
            name = (obj.get("spec") or {}).get("schedulerName")
            if name in self.profiles:
                component = name
        self._put(("event", build_event(obj, event_type, reason, message, component,
                                        self.instance, action, related), None, None))

    def status(self, pod: JSON, patch: JSON,
               still_wanted: Callable[[], bool] | None = None) -> None:
        """Patch the pod's status; ``still_wanted`` is asked right before sending (a pod bound
        meanwhile must not get a stale PodScheduled=False)."""
        self._put(("status", pod, patch, still_wanted))

    async def _work(self) -> None:
        while True:
            kind, obj, patch, still_wanted = await self._queue.get()
            try:
                if still_wanted is not None and not still_wanted():
                    pass
                elif kind == "event":
                    await self._post_event(obj)
                elif patch is not None:
                    meta = obj.get("metadata") or {}
                    await self.kube.patch(
                        resource_path(CORE, "pods", meta.get("namespace"), meta.get("name"),
                                      "status"), patch, kind="strategic", fence=self.may_act)
            except KubeError as error:
                if not (error.not_found or error.fenced):
                    log.warning("could not record", extra={"kind": kind, "error": str(error)})
            except Exception:  # a recorder must never die
                log.exception("recording failed")
            finally:
                self._queue.task_done()

    async def _post_event(self, event: JSON) -> None:
        ref = event["involvedObject"]
        key = (str(ref.get("uid")), event["reason"], event["message"])
        now = time.monotonic()
        seen = self._seen.get(key)
        namespace = event["metadata"]["namespace"]
        if seen is not None and now - seen[3] < _CORRELATION_WINDOW:
            name, first, count, _ = seen
            try:
                await self.kube.patch(resource_path(CORE, "events", namespace, name),
                                      {"count": count + 1, "lastTimestamp": now_rfc3339()})
                self._seen[key] = (name, first, count + 1, now)
                return
            except KubeError as error:
                if not error.not_found:
                    raise
        await self.kube.create(resource_path(CORE, "events", namespace), event)
        if len(self._seen) > 50_000:
            self._seen.clear()
        self._seen[key] = (event["metadata"]["name"], event["firstTimestamp"], 1, now)
