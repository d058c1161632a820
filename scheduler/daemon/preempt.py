"""Carrying out the engine's preemption choice: nominate the node, evict the victims.

Design: the engine's :func:`~berthmaster.scheduler.preemption.evaluate_preemption` is pure (whether
the pod may preempt at all, which node, which victims); this module acts on its choice, in a
background task so the scheduling loop never waits on it, in upstream's order:

1. ``status.nominatedNodeName`` of the preemptor (merge patch of ``pods/<name>/status``), so
   the room being made is reserved for it and ``kubectl get pod -o wide`` shows where it goes;
2. per victim: the ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``), a graceful
   DELETE with the victim's uid as precondition, and a ``Preempted`` Event
   ("Preempted by pod <uid> on node <node>"); at the same time the lower-priority pods
   nominated to that node lose their nomination (the room is no longer theirs).

The preemptor itself is parked like any unschedulable pod; the victims' deletions are the
cluster events that wake it, and it then lands on the nominated node or wherever fits first.

Like a binding, each write is sent only while this replica leads: ``may_act`` is the request's
``fence`` (:mod:`berthmaster.foundation.kube`), asked after the client's rate limiter wait,
immediately
before each PATCH and DELETE, not once before a wait: a leader frozen past its Lease (SIGSTOP, a
long pause, a long queue for a token) must not wake up and delete the victims of a decision the
new leader never made. A fenced write ends the whole preemption: nothing after it is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.logs import ObjectRef
from berthmaster.scheduler.daemon import events
from berthmaster.scheduler.daemon.events import EventRecorder
from berthmaster.scheduler.model import PodView

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.preempt")


def _victim_dicts(victims: Iterable[Any]) -> list[JSON]:
    return [dict(victim.raw) if isinstance(victim, PodView) else dict(victim)
            for victim in victims]


class Preemptor:
    def __init__(self, kube: KubeClient, recorder: EventRecorder, scheduler_name: str,
                 may_act: Callable[[], bool] = lambda: True):
        self.kube = kube
        self.recorder = recorder
        self.scheduler_name = scheduler_name
        self.may_act = may_act
        self._tasks: set[asyncio.Task[None]] = set()

    def preempt(self, pod: JSON, node: str, victims: Iterable[Any],
                unnominate: Iterable[Any] = ()) -> None:
        """Nominate ``pod`` to ``node``, evict ``victims`` and clear the nomination of the
        ``unnominate`` pods (lower-priority pods nominated to that node: preemption.go,
        prepareCandidate, getLowerPriorityNominatedPods and clearNominatedNodeName)."""
        task = asyncio.create_task(self._preempt(pod, node, _victim_dicts(victims),
                                                 _victim_dicts(unnominate)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait_idle(self) -> None:
        """Return once every preemption under way has finished (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _preempt(self, pod: JSON, node: str, victims: list[JSON],
                       unnominate: list[JSON]) -> None:
        meta = pod.get("metadata") or {}
        try:
            await self.kube.patch(
                resource_path(CORE, "pods", meta.get("namespace"), meta.get("name"), "status"),
                {"status": {"nominatedNodeName": node}}, kind="merge", fence=self.may_act)
        except KubeError as error:
            if error.fenced:
                log.info("not leading: preemption dropped", extra={"pod": meta.get("name")})
                return
            log.warning("could not nominate", extra={"pod": ObjectRef.of(pod),
                                                     "node": ObjectRef(node),
                                                     "error": str(error)})
            return
        await asyncio.gather(*(self._evict(pod, node, victim) for victim in victims),
                             *(self._unnominate(other) for other in unnominate))
        log.info("preempted", extra={"pod": ObjectRef.of(pod), "node": ObjectRef(node),
                                      "victims": len(victims)})

    async def _unnominate(self, pod: JSON) -> None:
        meta = pod.get("metadata") or {}
        try:
            await self.kube.patch(
                resource_path(CORE, "pods", meta.get("namespace"), meta.get("name"), "status"),
                {"status": {"nominatedNodeName": None}}, kind="merge", fence=self.may_act)
        except KubeError as error:
            if not (error.not_found or error.fenced):
                log.warning("could not clear a nomination", extra={"pod": ObjectRef.of(pod),
                                                                   "error": str(error)})

    async def _evict(self, preemptor: JSON, node: str, victim: JSON) -> None:
        meta = victim.get("metadata") or {}
        path = resource_path(CORE, "pods", meta.get("namespace"), meta.get("name"))
        try:
            await self.kube.patch(f"{path}/status",
                                  events.disruption_target_patch(self.scheduler_name),
                                  kind="strategic", fence=self.may_act)
            await self.kube.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions",
                                          "preconditions": {"uid": meta.get("uid")}},
                                   fence=self.may_act)
        except KubeError as error:
            if error.fenced:
                log.info("not leading: victim kept", extra={"victim": meta.get("name")})
            elif not (error.not_found or error.conflict):
                log.warning("could not delete victim", extra={"victim": ObjectRef.of(victim),
                                                              "error": str(error)})
            return
        self.recorder.event(victim, "Normal", events.PREEMPTED,
                            events.preempted_message(preemptor, node), "Preempting",
                            related=preemptor)
