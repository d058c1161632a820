"""Binding: POST ``pods/<name>/binding`` concurrently, after the placement is assumed.

Design: the scheduling loop assumes the pod on its node in the snapshot first (so the next
decision already sees the node's usage: a node is never over-committed between assume and
bind), then hands the binding to :meth:`Binder.bind`, which runs it as a task and returns at
once; at most ``concurrency`` bindings are in flight. Outcomes:

- **201**: the ``Scheduled`` Event, the pod leaves the queue. The assumption stays until the
  watch shows the pod bound (then the real object replaces it).
- **409** (the pod is already bound, or is another pod of the same name now: the binding names
  the uid as a precondition): the assumption is forgotten and the pod leaves the queue; the
  watch brings whatever is true. Never a crash, never a second binding.
- **404** (the pod is gone): forgotten, dropped.
- anything else: forgotten and requeued with backoff, with ``PodScheduled=False`` reason
  ``SchedulerError`` and the nomination cleared.

Every failure posts kube-scheduler's ``FailedScheduling`` Event, ``running Bind plugin
"DefaultBinder": <the API server's message>``.

A binding is only sent while this replica leads: ``may_act`` is checked before taking a slot
and is the POST's ``fence`` (:mod:`berthmaster.foundation.kube`), asked again after the client's
rate
limiter wait, immediately before sending; a fenced binding is forgotten and requeued, with no
Event and no status patch (the new leader decides).

The task is the pod's whole binding cycle (schedule_one.go bindingCycle, run in a goroutine
upstream): WaitOnPermit (a pod some Permit plugin holds waits here, assumed, while the loop goes
on), then the profile's PreBind plugins (VolumeBinding's wait for the PV controller among
them), then its Bind plugins (DefaultBinder is the POST above, in a slot; the PreBind and Permit
waits hold none), then PostBind (:mod:`.extensions`). A pod rejected while waiting on Permit
is unreserved, forgotten and parked as Unschedulable with a FitError on its node (``0/1 nodes
are available: 1 <the rejection>.``); when PreBind fails it is unreserved, forgotten and
requeued with upstream's FailedScheduling text and ``PodScheduled=False`` reason
``SchedulerError``; a pod deleted meanwhile is dropped. Every failed or abandoned binding runs
every Unreserve (in reverse order) before the pod is forgotten.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.logs import ObjectRef
from berthmaster.scheduler.daemon import events, hints
from berthmaster.scheduler.daemon.events import EventRecorder
from berthmaster.scheduler.daemon.extensions import Extensions, Rejection
from berthmaster.scheduler.daemon.hints import ClusterEvent
from berthmaster.scheduler.daemon.metrics import SchedulerMetrics
from berthmaster.scheduler.daemon.queue import QueuedPod, SchedulingQueue
from berthmaster.scheduler.daemon.volumes import (
    DEFAULT_BIND_TIMEOUT_SECONDS,
    NotLeader,
    PreBindError,
    VolumeBinder,
)
from berthmaster.scheduler.engine import fit_error_message
from berthmaster.scheduler.framework import CycleState, PluginError
from berthmaster.scheduler.snapshot import Snapshot, pod_key

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.binder")


def bind_error_message(error: KubeError) -> str:
    """The FailedScheduling text of a failed binding (framework/runtime/framework.go,
    RunBindPlugins: "running Bind plugin %q: %w", with the API server's message)."""
    return f'running Bind plugin "DefaultBinder": {error.message or error.reason or error}'


def binding_body(pod: JSON, node: str) -> JSON:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                     "uid": meta.get("uid")},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


class Binder:
    def __init__(
        self,
        kube: KubeClient,
        snapshot: Snapshot,
        queue: SchedulingQueue,
        recorder: EventRecorder,
        metrics: SchedulerMetrics,
        concurrency: int = 64,
        may_act: Callable[[], bool] = lambda: True,
        volume_bind_timeout: float = DEFAULT_BIND_TIMEOUT_SECONDS,
    ):
        self.kube = kube
        self.volumes = VolumeBinder(kube, snapshot, bind_timeout=volume_bind_timeout)
        self.snapshot = snapshot
        self.queue = queue
        self.recorder = recorder
        self.metrics = metrics
        self.may_act = may_act
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._tasks: set[asyncio.Task[None]] = set()
        self.bound = 0
        self.conflicts = 0

    def bind(self, info: QueuedPod, node: str, started: float, extensions: Extensions,
             state: CycleState) -> None:
        """The binding cycle of a pod assumed on ``node`` and reserved (``state``): a task of
        its own, so a wait at Permit holds up nothing else."""
        task = asyncio.create_task(self._bind(info, node, started, extensions, state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float) -> None:
        """Wait for the bindings in flight (graceful shutdown)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    def cancel(self) -> None:
        """Abandon the bindings not yet sent (leadership lost)."""
        for task in list(self._tasks):
            task.cancel()

    def _give_back(self, info: QueuedPod, node: str, extensions: Extensions,
                   state: CycleState) -> None:
        """Unreserve every plugin (reverse order), then forget the assumed pod."""
        extensions.unreserve(state, info.pod, node)
        self.snapshot.forget(info.pod)

    async def _bind(self, info: QueuedPod, node: str, started: float, extensions: Extensions,
                    state: CycleState) -> None:
        pod = info.pod
        meta = pod.get("metadata") or {}
        try:
            rejection = await extensions.wait_on_permit(pod)
            if rejection is not None:
                self._permit_rejected(info, node, extensions, state, rejection, started)
                return
            try:
                await extensions.pre_bind(state, pod, node)
            except PreBindError as error:
                self._pre_bind_failed(info, node, extensions, state, error, started)
                return
            except NotLeader:
                self._give_back(info, node, extensions, state)
                self.queue.requeue(info, unschedulable=False)
                return
            bound_by = await extensions.bind(state, pod, node)
            sent = time.perf_counter()
            if bound_by is None:
                async with self._slots:
                    if not self.may_act():
                        self._give_back(info, node, extensions, state)
                        self.queue.requeue(info, unschedulable=False)
                        return
                    sent = time.perf_counter()
                    await self.kube.create(
                        resource_path(CORE, "pods", meta.get("namespace"), meta.get("name"),
                                      "binding"), binding_body(pod, node), fence=self.may_act)
        except asyncio.CancelledError:
            waiting = extensions.waiting.get(pod_key(pod))
            if waiting is not None:
                extensions.waiting.remove(pod_key(pod))
            self._give_back(info, node, extensions, state)
            self.queue.requeue(info, unschedulable=False)
            raise
        except PluginError as error:
            self._give_back(info, node, extensions, state)
            self._failed(info, node, str(error), started)
            return
        except KubeError as error:
            if error.fenced:
                self._give_back(info, node, extensions, state)
                self.queue.requeue(info, unschedulable=False)
                return
            extensions.unreserve(state, pod, node)
            self._failed(info, node, bind_error_message(error), started,
                         gone=error.conflict or error.not_found, status=error.status)
            return
        now = time.perf_counter()
        self.bound += 1
        self.metrics.bind("Success", now - sent)
        self.metrics.attempt("scheduled", now - started)
        self.metrics.scheduled(info.attempts, self.queue.clock() - info.first_seen)
        self.queue.done(info.key)
        self.recorder.event(pod, "Normal", events.SCHEDULED,
                            events.scheduled_message(pod, node), "Binding")
        extensions.post_bind(state, pod, node)
        log.debug("bound", extra={"pod": ObjectRef.from_key(info.key), "node": ObjectRef(node)})

    def _permit_rejected(self, info: QueuedPod, node: str, extensions: Extensions,
                         state: CycleState, rejection: Rejection, started: float) -> None:
        """bindingCycle (schedule_one.go): a pod rejected while waiting on Permit is a FitError
        on its one node; handleBindingCycleError unreserves and forgets it (an AssignedPodDelete
        for the others) and the failure handler parks it as Unschedulable."""
        pod = info.pod
        self._give_back(info, node, extensions, state)
        self.queue.move_for_event(ClusterEvent(hints.ASSIGNED_POD_DELETE))
        message = fit_error_message(1, {node: rejection.status})
        self.metrics.attempt("unschedulable", time.perf_counter() - started)
        log.info("rejected while waiting on permit", extra={
            "pod": ObjectRef.from_key(info.key), "plugin": rejection.plugin,
            "reason": message})
        self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message, "Scheduling")
        uid, key = pod_key(pod), info.key
        self.recorder.status(
            pod, events.unschedulable_status_patch(message),
            still_wanted=lambda: key in self.queue and not self.snapshot.is_assumed(uid))
        self.queue.requeue(info, unschedulable=True,
                           hint_events=extensions.hint_events(pod, rejection.plugin),
                           rejected_by=frozenset((rejection.plugin,)))

    def _failed(self, info: QueuedPod, node: str, message: str, started: float,
                gone: bool = False, status: int | None = None) -> None:
        """handleBindingCycleError (schedule_one.go): forget the pod, then the failure
        handler's FailedScheduling Event, in RunBindPlugins' words, for every failure; a pod
        already bound (409) or gone (404) leaves the queue, any other is requeued with
        ``PodScheduled=False`` reason ``SchedulerError`` and its nomination cleared."""
        pod = info.pod
        self.snapshot.forget(pod)
        self.metrics.bind("Error", 0.0)
        self.metrics.attempt("error", time.perf_counter() - started)
        self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message, "Scheduling")
        if gone:
            # Already bound (by us earlier, or by someone else), or gone: nothing to retry
            # (upstream finds it bound or missing in its informer cache and calls Done).
            self.conflicts += 1
            log.info("binding not needed", extra={"pod": ObjectRef.from_key(info.key),
                                                  "node": ObjectRef(node),
                                                  "status": status, "error": message})
            self.queue.done(info.key)
            return
        log.warning("binding failed", extra={"pod": ObjectRef.from_key(info.key),
                                             "node": ObjectRef(node),
                                             "error": message})
        uid, key = pod_key(pod), info.key
        nominated = "" if (pod.get("status") or {}).get("nominatedNodeName") else None
        self.recorder.status(
            pod, events.unschedulable_status_patch(message, reason=events.SCHEDULER_ERROR,
                                                   nominated_node=nominated),
            still_wanted=lambda: key in self.queue and not self.snapshot.is_assumed(uid))
        self.queue.requeue(info, unschedulable=False)

    def _pre_bind_failed(self, info: QueuedPod, node: str, extensions: Extensions,
                         state: CycleState, error: PreBindError, started: float) -> None:
        """handleBindingCycleError (schedule_one.go): Unreserve, forget, and the failure
        handler's FailedScheduling Event and PodScheduled condition (reason SchedulerError: a
        PreBind error is not an Unschedulable status)."""
        pod = info.pod
        self._give_back(info, node, extensions, state)
        message = str(error)
        log.warning("pre-bind failed", extra={"pod": ObjectRef.from_key(info.key),
                                                     "node": ObjectRef(node),
                                                     "error": message})
        self.metrics.attempt("error", time.perf_counter() - started)
        if error.pod_gone:
            self.queue.done(info.key)
            return
        self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message, "Scheduling")
        uid = pod_key(pod)
        key = info.key
        self.recorder.status(
            pod, events.unschedulable_status_patch(message, reason=events.SCHEDULER_ERROR),
            still_wanted=lambda: key in self.queue and not self.snapshot.is_assumed(uid))
        self.queue.requeue(info, unschedulable=False)
