"""The loop's writes, and only those: MachineSet replicas, Machine and Node marks, evictions,
events.

Design: every write is guarded by what was read (replicas through the MachineSet's ``scale``
subresource from the size the decision saw: :meth:`Actuator.set_replicas`; node taints with
the node's resourceVersion: :mod:`.taints`), so a decision made on a stale read writes nothing
and is taken again next loop. The waits inside a node's removal (eviction retries, the
delay-deletion annotations) take their clock and sleep from the actuator (:mod:`.actuation`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.autoscaler import events, taints
from berthmaster.operator.autoscaler.actuation import (
    DELAY_DELETION_POLL,
    EVICTION_RETRY_TIME,
    NODE_DELETION_DELAY_TIMEOUT,
    has_delay_deletion,
    retry_until,
)
from berthmaster.operator.autoscaler.groups import DELETE_MACHINE_KEY
from berthmaster.operator.autoscaler.observe import ACTIVE_PODS, MACHINE_API
from berthmaster.operator.autoscaler.taints import TO_BE_DELETED_TAINT
from berthmaster.operator.machines import drain

JSON = dict[str, Any]
CONFLICT_ATTEMPTS = 3  # GET+PUT rounds of one replicas write before leaving it to the next loop

log = logging.getLogger("berthmaster.operator.autoscaler")


def stamp(when: float) -> str:
    """A wall-clock time as the RFC 3339 stamp written to the API."""
    return format_rfc3339(datetime.fromtimestamp(when, UTC))


class StaleDecision(KubeError):
    """A MachineSet's replicas changed between the read a decision was made on and its write:
    nothing was written; the next loop decides again from the new size."""

    def __init__(self, group_id: str, expected: int, found: int):
        super().__init__(409, "Conflict", f"MachineSet {group_id} has {found} replicas, not the "
                         f"{expected} this decision was made on; deciding again next loop")


class Actuator:
    """The writes: MachineSet replicas, Machine and Node marks, events."""

    def __init__(self, kube: KubeClient, now: float, clock: float | None = None):
        self.kube = kube
        self.now = now  # wall clock: what is written to the API (stamps, the taint's value)
        self.clock = now if clock is None else clock  # monotonic: what durations are made of
        self.when = datetime.fromtimestamp(now, UTC)
        # the live clock and the sleep of the waits inside a removal (:mod:`.actuation`)
        self.monotonic: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def set_replicas(self, group_id: str, expected: int, replicas: int) -> None:
        """Set the MachineSet's replicas from ``expected`` (the size the decision saw) to
        ``replicas`` through its ``scale`` subresource, as upstream's clusterapi provider
        (clusterapi_unstructured.go ``SetSize``: GET the Scale, PUT it back with the
        resourceVersion read). A size other than ``expected`` raises :class:`StaleDecision` and
        writes nothing; a 409 (the MachineSet changed between our GET and PUT) reads it again
        and re-checks, so a concurrent change of replicas is never overwritten."""
        namespace, name = group_id.split("/", 1)
        path = resource_path(MACHINE_API, "machinesets", namespace, name, "scale")
        for _ in range(CONFLICT_ATTEMPTS):
            scale = await self.kube.get(path)
            found = int((scale.get("spec") or {}).get("replicas") or 0)
            if found != expected:
                raise StaleDecision(group_id, expected, found)
            scale["spec"] = {**(scale.get("spec") or {}), "replicas": replicas}
            try:
                await self.kube.replace(path, scale)
                return
            except KubeError as error:
                if not error.conflict:
                    raise
        raise KubeError(409, "Conflict", f"MachineSet {group_id} kept changing; its replicas "
                        "were not set, deciding again next loop")

    async def mark_machine(self, namespace: str, name: str) -> None:
        await self.kube.patch(resource_path(MACHINE_API, "machines", namespace, name),
                              {"metadata": {"annotations": {DELETE_MACHINE_KEY: stamp(self.now)}}})

    async def unmark_machine(self, namespace: str, name: str) -> None:
        """Upstream's ``UnmarkMachineForDeletion`` after a failed ``SetSize``."""
        try:
            await self.kube.patch(resource_path(MACHINE_API, "machines", namespace, name),
                                  {"metadata": {"annotations": {DELETE_MACHINE_KEY: None}}})
        except KubeError as error:
            if not error.not_found:
                log.warning("could not unmark Machine %s/%s: %s", namespace, name, error)

    async def taint_node(self, node: Mapping[str, Any], cordon: bool = False) -> None:
        """Upstream's ``MarkToBeDeleted``: the taint, and ``spec.unschedulable`` when cordoning
        (``--cordon-node-before-terminating``); guarded by the node's resourceVersion
        (:mod:`.taints`)."""
        taint = {"key": TO_BE_DELETED_TAINT, "value": str(int(self.now)),
                 "effect": "NoSchedule"}
        await taints.update_taints(self.kube, node,
                                   lambda fresh: taints.with_taint(fresh, taint, cordon))

    async def untaint_node(self, node: Mapping[str, Any], uncordon: bool = False) -> None:
        """Upstream's ``CleanToBeDeleted``: the taint goes, and the cordon it added."""
        try:
            await taints.update_taints(self.kube, node, lambda fresh: taints.without_taints(
                fresh, [TO_BE_DELETED_TAINT], uncordon))
        except KubeError as error:
            log.warning("could not remove %s from %s: %s", TO_BE_DELETED_TAINT,
                        node["metadata"]["name"], error)

    async def pods_on(self, node_name: str) -> list[JSON]:
        """The node's pods as the API server has them now (not the watch cache's)."""
        pods, _ = await self.kube.list_all(resource_path(CORE, "pods"), fieldSelector=(
            f"spec.nodeName={node_name},{ACTIVE_PODS}"))
        return pods

    async def evict(self, pod: Mapping[str, Any], grace_period: int) -> None:
        """POST a policy/v1 Eviction for ``pod`` with ``grace_period`` seconds to stop; a pod
        already gone is fine, a refusal (a PodDisruptionBudget's 429) raises."""
        meta = pod.get("metadata") or {}
        body = drain.eviction_body(dict(pod), unreachable=False)
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period}
        try:
            await self.kube.create(resource_path(CORE, "pods", meta.get("namespace"),
                                                 meta.get("name"), "eviction"), body)
        except KubeError as error:
            if not error.not_found:
                raise

    async def evict_retrying(self, pod: Mapping[str, Any], grace_period: int,
                             deadline: float) -> KubeError | None:
        """:meth:`evict`, tried again every ``EVICTION_RETRY_TIME`` until ``deadline``
        (monotonic) while refused; the last refusal if it never went through."""
        async def attempt() -> KubeError | None:
            try:
                await self.evict(pod, grace_period)
            except KubeError as error:
                return error
            return None
        return await retry_until(attempt, deadline, EVICTION_RETRY_TIME, self.monotonic,
                                 self.sleep)

    async def wait_for_delay_deletion(self, node_name: str) -> bool:
        """Upstream's ``WaitForDelayDeletion``: poll the node until it carries no
        ``delay-deletion.cluster-autoscaler.kubernetes.io/`` annotation, at most
        ``NODE_DELETION_DELAY_TIMEOUT``; whether they were all removed in time."""
        path = resource_path(CORE, "nodes", name=node_name)

        async def attempt() -> str | None:
            fresh = await self.kube.get(path)
            return "annotated" if has_delay_deletion(fresh) else None
        deadline = self.monotonic() + NODE_DELETION_DELAY_TIMEOUT
        return await retry_until(attempt, deadline, DELAY_DELETION_POLL, self.monotonic,
                                 self.sleep) is None

    async def event(self, obj: Mapping[str, Any], reason: str, message: str,
                    event_type: str = "Normal") -> None:
        await events.post(self.kube, obj, reason, message, self.when, event_type)

