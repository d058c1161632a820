"""The scheduling cycle: one pod at a time, decided against the live snapshot.

Design: as kube-scheduler, decisions are sequential and binding is concurrent. Each cycle pops
the best pending pod, asks the engine (pure, no I/O) for a node, and then either assumes the
pod there and hands it to the binder, or — when nothing fits — asks the engine for a
preemption, records ``FailedScheduling`` (the engine's upstream-format message) and the
``PodScheduled=False/Unschedulable`` condition, and parks the pod until a cluster event could
help it (after the profile's other PostFilter plugins had their say). A pod with
``spec.resourceClaims`` is refused before the engine runs
(:mod:`~berthmaster.scheduler.plugins.dynamic_resources`). A decision made, the pod is assumed
and the profile's Reserve plugins (VolumeBinding's assumes the pod's volumes, :mod:`.volumes`)
and Permit plugins run (:mod:`.extensions`) before the binder's task runs the binding cycle.
Because the engine runs synchronously in the event loop, the watches cannot change the
snapshot in the middle of a decision; the loop yields to them between cycles.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from berthmaster.foundation.logs import ObjectRef
from berthmaster.scheduler.daemon import events
from berthmaster.scheduler.daemon.binder import Binder
from berthmaster.scheduler.daemon.events import EventRecorder
from berthmaster.scheduler.daemon.extensions import Extensions, Rejection
from berthmaster.scheduler.daemon.metrics import SchedulerMetrics
from berthmaster.scheduler.daemon.preempt import Preemptor
from berthmaster.scheduler.daemon.queue import QueuedPod, SchedulingQueue
from berthmaster.scheduler.daemon.waiting import WaitingPods
from berthmaster.scheduler.engine import Decision, Engine, fit_error_message
from berthmaster.scheduler.framework import CycleState, PluginError
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import dynamic_resources
from berthmaster.scheduler.preemption import (
    PreemptionResult,
    evaluate_preemption,
    failed_scheduling_message,
)
from berthmaster.scheduler.snapshot import Snapshot, pod_key

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler")


class SchedulingLoop:
    def __init__(
        self,
        engine: Engine,
        snapshot: Snapshot,
        queue: SchedulingQueue,
        binder: Binder,
        preemptor: Preemptor,
        recorder: EventRecorder,
        metrics: SchedulerMetrics,
        may_act: Callable[[], bool] = lambda: True,
        engines: Mapping[str, Engine] | None = None,
        extensions: Mapping[str, Extensions] | None = None,
    ):
        # one engine per profile, by schedulerName (one queue serves them all, as upstream);
        # ``engine`` is the first profile's
        self.engine = engine
        self.engines: Mapping[str, Engine] = engines or {}
        # each profile's Reserve/Permit/.../PostBind plugins, by schedulerName
        self.extensions: Mapping[str, Extensions] = extensions or {}
        self.snapshot = snapshot
        self.queue = queue
        self.binder = binder
        self.preemptor = preemptor
        self.recorder = recorder
        self.metrics = metrics
        self.may_act = may_act

    async def run(self) -> None:
        while True:
            info = await self.queue.pop()
            if not self.may_act():
                self.queue.requeue(info, unschedulable=False)
                return
            try:
                self.schedule_one(info)
            except Exception:  # a bug in any step of one cycle must not stop the others
                self._contain(info)
            await asyncio.sleep(0)  # let watches and bindings progress between decisions

    def _contain(self, info: QueuedPod) -> None:
        """A cycle that raised outside the engine's own containment (a plugin's queueing hint,
        the PostFilter step, a bug of ours): logged, counted as an error and, unless the pod was
        already handed to the binder, backed off for another attempt — as schedule_one.go's
        handleSchedulingFailure does with an error."""
        log.exception("scheduling cycle failed", extra={"pod": ObjectRef.from_key(info.key)})
        self.metrics.attempt("error", 0.0)  # the cycle's duration is lost with its frame
        if not self.snapshot.is_assumed(pod_key(info.pod)):
            self.queue.requeue(info, unschedulable=False)

    def schedule_one(self, info: QueuedPod) -> None:
        pod = info.pod
        if info.deleted or (pod.get("spec") or {}).get("nodeName"):
            self.queue.done(info.key)
            return
        started = time.perf_counter()
        engine = self.engine_for(pod)
        refused = dynamic_resources.refusal(pod)
        if refused is not None:
            self._refuse(info, refused.reasons[0], started)
            return
        try:
            decision = engine.schedule(pod, self.snapshot)
        except Exception as error:  # an engine or plugin bug must not kill the scheduler
            # a plugin's error is worded as runtime/framework.go words it, naming the plugin
            self._plugin_failed(info, error, started)
            return
        self.metrics.algorithm_duration.observe(time.perf_counter() - started)
        if decision.node:
            self._reserve_and_permit(info, decision.node, started)
            return
        nominated, result = None, None
        if decision.total_nodes == 0:
            # schedule_one.go: ErrNoNodesAvailable is UnschedulableAndUnresolvable with no
            # PostFilter; the nomination is cleared
            nominated = _cleared(pod)
        elif engine.policy.preemption:
            nominated, result = self._try_preemption(pod, decision, engine)
            if nominated is None and result is not None and result.clear_nomination:
                nominated = _cleared(pod)
        else:  # the other PostFilter plugins' words (see evaluate_preemption)
            result = evaluate_preemption(pod, self.snapshot, engine, decision)
        self.metrics.attempt("unschedulable", time.perf_counter() - started)
        message = failed_scheduling_message(decision, result)
        if nominated is None and decision.total_nodes:
            # the PostFilter plugins after DefaultPreemption (RunPostFilterPlugins: the next
            # runs while the earlier ones found nothing)
            for extra in self.extensions_for(pod).post_filter(pod):
                message = f"{message} {extra}"
        log.info("unschedulable", extra={"pod": ObjectRef.from_key(info.key), "reason": message})
        self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message, "Scheduling")
        self._patch_status(info, events.unschedulable_status_patch(
            message, nominated_node=nominated))
        self.queue.requeue(info, unschedulable=True,
                           hint_events=engine.unschedulable_events(
                               decision, PodView.from_dict(pod)) or None,
                           rejected_by=engine.plugin_names(decision.rejected_by))

    def _reserve_and_permit(self, info: QueuedPod, node: str, started: float) -> None:
        """schedule_one.go, after the decision: assume, Reserve, Permit; then the binding
        cycle runs in the binder's task. A Reserve or Permit rejection (or error) runs every
        Unreserve, forgets the pod and fails the attempt (a FitError on its node when
        rejected, the plugin's error otherwise)."""
        pod = info.pod
        extensions = self.extensions_for(pod)
        state = CycleState()
        self.snapshot.assume(pod, node)
        try:
            rejection = extensions.reserve(state, pod, node)
            outcome = extensions.permit(state, pod, node) if rejection is None else rejection
        except PluginError as error:
            extensions.unreserve(state, pod, node)
            self.snapshot.forget(pod)
            self._plugin_failed(info, error, started)
            return
        if isinstance(outcome, Rejection):
            extensions.unreserve(state, pod, node)
            self.snapshot.forget(pod)
            message = fit_error_message(1, {node: outcome.status})
            self.metrics.attempt("unschedulable", time.perf_counter() - started)
            log.info("unschedulable", extra={"pod": ObjectRef.from_key(info.key),
                                             "plugin": outcome.plugin, "reason": message})
            self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message,
                                "Scheduling")
            self._patch_status(info, events.unschedulable_status_patch(message))
            self.queue.requeue(info, unschedulable=True,
                               hint_events=extensions.hint_events(pod, outcome.plugin),
                               rejected_by=frozenset((outcome.plugin,)))
            return
        self.binder.bind(info, node, started, extensions, state)

    def _plugin_failed(self, info: QueuedPod, error: Exception, started: float) -> None:
        """An Error status from the engine or a plugin: logged with the plugin's name, the
        FailedScheduling Event and PodScheduled reason SchedulerError with the nomination
        cleared (schedule_one.go), and a backoff retry."""
        pod = info.pod
        plugin = error.plugin if isinstance(error, PluginError) else None
        log.error("scheduling failed", exc_info=error,
                  extra={"pod": ObjectRef.from_key(info.key), "plugin": plugin})
        self.metrics.attempt("error", time.perf_counter() - started)
        message = (str(error) if plugin is not None
                   else f"running the scheduling algorithm: {error}")
        self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message, "Scheduling")
        self._patch_status(info, events.unschedulable_status_patch(
            message, reason=events.SCHEDULER_ERROR, nominated_node=_cleared(pod)))
        self.queue.requeue(info, unschedulable=False)

    def extensions_for(self, pod: JSON) -> Extensions:
        """The Lifecycle plugins of the pod's profile."""
        name = (pod.get("spec") or {}).get("schedulerName") or ""
        found = self.extensions.get(name)
        if found is None:
            found = self.extensions.get(self.engine.policy.scheduler_name)
        if found is None:  # a loop built without extensions: the in-tree ones alone
            found = Extensions({}, WaitingPods())
        return found

    def _patch_status(self, info: QueuedPod, patch: JSON) -> None:
        """The pod's PodScheduled condition (and nomination), unless the pod was placed or
        left the queue by the time it is sent."""
        uid, key = pod_key(info.pod), info.key
        self.recorder.status(
            info.pod, patch,
            still_wanted=lambda: key in self.queue and not self.snapshot.is_assumed(uid))

    def engine_for(self, pod: JSON) -> Engine:
        """The engine of the pod's profile (its ``spec.schedulerName``)."""
        name = (pod.get("spec") or {}).get("schedulerName")
        return self.engines.get(name, self.engine) if name else self.engine

    def _refuse(self, info: QueuedPod, reason: str, started: float) -> None:
        """A pod no node can take whatever changes (a PreFilter's UnschedulableAndUnresolvable):
        FailedScheduling, PodScheduled=False, parked until the pod itself changes or the
        periodic flush."""
        pod = info.pod
        message = fit_error_message(len(self.snapshot.node_names), {}, reason)
        self.metrics.attempt("unschedulable", time.perf_counter() - started)
        log.info("unschedulable", extra={"pod": ObjectRef.from_key(info.key), "reason": message})
        self.recorder.event(pod, "Warning", events.FAILED_SCHEDULING, message, "Scheduling")
        key = info.key
        self.recorder.status(pod, events.unschedulable_status_patch(message),
                             still_wanted=lambda: key in self.queue)
        self.queue.requeue(info, unschedulable=True, hint_events=frozenset())

    def _try_preemption(self, pod: JSON, decision: Decision, engine: Engine
                        ) -> tuple[str | None, PreemptionResult | None]:
        """Ask the engine for victims; start evicting them. Returns (nominated node, the
        preemption outcome, None when it failed)."""
        self.metrics.preemption_attempts.inc()
        try:
            result = evaluate_preemption(pod, self.snapshot, engine, decision)
        except Exception:
            log.exception("preemption failed", extra={"pod": ObjectRef.of(pod)})
            return None, None
        choice = result.preemption
        if choice is None:
            return None, result
        self.metrics.preemption_victims.observe(len(choice.victims))
        priority = self.snapshot.priority(PodView.from_dict(pod))
        lower = [p for p in self.snapshot.nominated_pods.get(choice.node, {}).values()
                 if self.snapshot.priority(p) < priority and p.uid != pod_key(pod)]
        self.preemptor.preempt(pod, choice.node, choice.victims, lower)
        return choice.node, result


def _cleared(pod: JSON) -> str | None:
    """The nomination to write when it is to be cleared: "" when the pod has one (updatePod
    writes nominatedNodeName only when it changes), else None (nothing to write)."""
    return "" if (pod.get("status") or {}).get("nominatedNodeName") else None
