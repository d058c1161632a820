"""The drain's I/O: cordon a Node, list its pods, evict them through the Eviction API and wait
for them to go, as one attempt of ``kubectl drain`` (k8s.io/kubectl pkg/drain/drain.go and
cordon.go, which upstream's machine drain controller calls).

Design: :class:`NodeDrainer` makes the requests and does the waiting; every decision is a pure
function of :mod:`.drain` (which pods to evict, what an eviction's answer means, when an
evicted pod counts as gone, how errors are worded), unit-tested there. The Machine controller
decides *when* to drain and records the outcome (:mod:`.controller`); this module only runs
one attempt and says how it ended (:class:`DrainOutcome`). Pods are evicted concurrently; a
PodDisruptionBudget's 429 is retried every ``evict_retry_delay`` until the attempt's
``drain_wait`` runs out, then evicted pods are awaited until the same deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.machines import api, drain
from berthmaster.operator.machines.drain import DrainFailure

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.operator.machines")


@dataclass(frozen=True)
class DrainOutcome:
    """How one attempt ended: ``failure`` None when drained; ``node_found`` False when the
    Node was already gone (nothing drained, nothing to report)."""

    failure: DrainFailure | None = None
    node_found: bool = True


class NodeDrainer:
    def __init__(self, kube: KubeClient, clock: Callable[[], datetime], *,
                 drain_wait: float, evict_retry_delay: float, pod_poll: float):
        self.kube = kube
        self.clock = clock
        self.drain_wait = drain_wait
        self.evict_retry_delay = evict_retry_delay
        self.pod_poll = pod_poll

    async def drain(self, machine_name: str, name: str) -> DrainOutcome:
        """Cordon and drain the Node ``name`` (upstream's drainNode)."""
        try:
            node = await self.kube.get_if_exists(api.node_path(name)) if name else None
        except KubeError as error:
            return DrainOutcome(DrainFailure(f'unable to get node "{name}": '
                                                   f"{error.message}"))
        if node is None:
            log.info("could not find node from noderef, it may have already been deleted: %s",
                     name)
            return DrainOutcome(node_found=False)
        refused = await self.cordon(node, name)
        if refused is not None:
            return DrainOutcome(refused)
        unreachable = drain.node_is_unreachable(node)
        if unreachable:
            log.info("%s: node %r is unreachable, draining will ignore gracePeriod. PDBs are "
                     "still honored.", machine_name, name)
        plan = drain.plan_drain(await self.pods_on(name), unreachable=unreachable,
                                now=self.clock())
        deadline = asyncio.get_running_loop().time() + self.drain_wait
        results = await asyncio.gather(
            *(self.evict_and_wait(pod, unreachable, deadline) for pod in plan.evict),
            return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        errors = [result for result in results if isinstance(result, str)]
        if errors:
            return DrainOutcome(DrainFailure(drain.aggregate(errors)))
        log.info("drain successful for machine %r", machine_name)
        return DrainOutcome()

    async def cordon(self, node: JSON, name: str) -> DrainFailure | None:
        """Mark the Node unschedulable, unless another control-plane Node is cordoned already
        (upstream's isDrainAllowed); the failure when the drain may not go on."""
        if drain.must_check_control_plane_peers(node):
            try:
                nodes, _ = await self.kube.list_all(api.node_path())
            except KubeError as error:
                return DrainFailure("drain not permitted: could not list control plane "
                                          f"nodes: {error.message}")
            other = drain.cordoned_control_plane_node(nodes)
            if other is not None:
                log.warning("drain not permitted for node %r: found other control plane node "
                            "(%s) already cordoned: other node may be being drained, do not "
                            "continue until the other node is removed", name, other)
                return drain.drain_not_permitted()
        if not drain.is_cordoned(node):
            try:
                await self.kube.patch(api.node_path(name), {"spec": {"unschedulable": True}})
            except KubeError as error:
                log.warning("cordon failed for node %r: %s", name, error.message)
                return drain.cordon_failed()
        return None

    async def evict_and_wait(self, pod: JSON, unreachable: bool, deadline: float) -> str | None:
        """kubectl drain's per-pod loop: evict (429s retried until the deadline), then wait for
        the pod to go; None when gone, else the error for this pod."""
        loop = asyncio.get_running_loop()
        meta = pod["metadata"]
        path = resource_path(CORE, "pods", meta["namespace"], meta["name"])
        while not meta.get("deletionTimestamp"):  # a pod already going is only waited for
            if loop.time() >= deadline:
                return drain.global_timeout_error(pod, timedelta(seconds=self.drain_wait))
            try:
                await self.kube.create(f"{path}/eviction",
                                       drain.eviction_body(pod, unreachable=unreachable))
                break
            except KubeError as error:
                answer = drain.eviction_answer(error.status, error.body)
                if answer == drain.GONE:
                    return None
                if answer == drain.REFUSED:
                    return drain.eviction_error(pod, error.message)
                log.info("error when evicting pods/%r -n %r (will retry after %ss): %s",
                         meta["name"], meta["namespace"], self.evict_retry_delay, error.message)
                await asyncio.sleep(drain.pause(self.evict_retry_delay, deadline, loop.time()))
        return await self.wait_for_pod_gone(pod, unreachable, deadline)

    async def wait_for_pod_gone(self, pod: JSON, unreachable: bool, deadline: float
                                ) -> str | None:
        loop = asyncio.get_running_loop()
        meta = pod["metadata"]
        path = resource_path(CORE, "pods", meta["namespace"], meta["name"])
        while True:
            try:
                current = await self.kube.get_if_exists(path)
            except KubeError as error:
                return drain.wait_error(pod, error.message)
            if drain.evicted_pod_gone(pod, current, unreachable=unreachable, now=self.clock()):
                return None
            if loop.time() >= deadline:
                return drain.wait_timeout_error(pod)
            await asyncio.sleep(drain.pause(self.pod_poll, deadline, loop.time()))

    async def pods_on(self, node_name: str) -> list[JSON]:
        items, _ = await self.kube.list_all(resource_path(CORE, "pods"),
                                            fieldSelector=f"spec.nodeName={node_name}")
        return items
