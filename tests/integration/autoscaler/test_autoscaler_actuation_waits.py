"""The waits inside a node's removal, against the real API server's answers.

cluster-autoscaler core/scaledown/actuation/drain.go ``evictPod``: an eviction the API server
refuses because of a PodDisruptionBudget (429) is tried again every EvictionRetryTime until
--max-pod-eviction-time has passed, and only then fails the removal;
core/scaledown/actuation/delay.go ``WaitForDelayDeletion``: the node is polled until it carries
no ``delay-deletion.cluster-autoscaler.kubernetes.io/`` annotation, at most
--node-deletion-delay-timeout. The refusals here are the API server's own (a real PDB); the
test replaces only the Actuator's sleep, so that a retry comes at once, and acts on the cluster
at the first one, as another actor would meanwhile.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.operator.autoscaler.actuation import DELAY_DELETION_PREFIX
from berthmaster.operator.autoscaler.loop import Actuator
from tests.support.waiting import wait_for

POLICY = group_path("policy", "v1")
JSON = dict[str, Any]


def actuator(kube: KubeClient, on_first_sleep: Callable[[], Awaitable[None]] | None = None
             ) -> tuple[Actuator, list[float]]:
    """An Actuator whose waits between tries last 0.2 s; ``on_first_sleep`` runs once, at the
    first wait (after the first refusal). Returns it and the waits it asked for."""
    act = Actuator(kube, now=time.time(), clock=time.monotonic())
    asked: list[float] = []

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        if len(asked) == 1 and on_first_sleep is not None:
            await on_first_sleep()
        await asyncio.sleep(0.2)
    act.sleep = sleep
    return act, asked


async def guarded_pod(kube: KubeClient, namespace: str, node: str) -> tuple[JSON, str]:
    """A Running pod on ``node`` and a PodDisruptionBudget that allows no disruption of it."""
    app = f"guarded-{uuid.uuid4().hex[:6]}"
    pod = await kube.create(resource_path(CORE, "pods", namespace), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": app, "namespace": namespace, "labels": {"app": app}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry.example/app:1"}]}})
    await kube.create(resource_path(POLICY, "poddisruptionbudgets", namespace), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}})

    async def guarded() -> bool:
        # the Eviction API lets a Pending pod go whatever its budget
        # (pkg/registry/core/pod/storage/eviction.go, canIgnorePDB): wait until the pod runs and
        # the disruption controller has counted it (no disruption allowed)
        found = await kube.get(resource_path(CORE, "pods", namespace, app))
        budget = await kube.get(resource_path(POLICY, "poddisruptionbudgets", namespace, app))
        status = budget.get("status") or {}
        return ((found.get("status") or {}).get("phase") == "Running"
                and status.get("observedGeneration") == budget["metadata"].get("generation")
                and status.get("currentHealthy") == 1
                and status.get("disruptionsAllowed") == 0)
    await wait_for(guarded, timeout=60, what=f"pod {app} Running under its budget")
    return pod, app


async def test_a_pdb_refusal_is_retried_and_goes_through_once_allowed(
        kube: KubeClient, namespace: str, nodes: Any) -> None:
    node = (await nodes.create())["metadata"]["name"]
    pod, app = await guarded_pod(kube, namespace, node)

    async def budget_lifted() -> None:
        await kube.delete(resource_path(POLICY, "poddisruptionbudgets", namespace, app))

    act, asked = actuator(kube, budget_lifted)
    refused = await act.evict_retrying(pod, 0, deadline=time.monotonic() + 60)
    assert refused is None
    assert asked[0] == 10.0  # EvictionRetryTime, after the API server's first 429

    async def gone() -> bool:
        try:
            found = await kube.get(resource_path(CORE, "pods", namespace, app))
        except KubeError as error:
            return error.not_found
        return bool(found["metadata"].get("deletionTimestamp"))
    assert await wait_for(gone, timeout=30, what="the evicted pod going")


async def test_a_pdb_refusal_that_lasts_fails_the_removal_at_the_deadline(
        kube: KubeClient, namespace: str, nodes: Any) -> None:
    node = (await nodes.create())["metadata"]["name"]
    pod, app = await guarded_pod(kube, namespace, node)
    act, asked = actuator(kube)
    refused = await act.evict_retrying(pod, 0, deadline=time.monotonic() + 2)
    assert refused is not None and refused.too_many_requests, refused
    assert len(asked) >= 2  # tried again, not failed at the first refusal
    still = await kube.get(resource_path(CORE, "pods", namespace, app))
    assert not still["metadata"].get("deletionTimestamp")


async def test_the_removal_waits_for_delay_deletion_annotations(
        kube: KubeClient, nodes: Any) -> None:
    node = (await nodes.create())["metadata"]["name"]
    key = f"{DELAY_DELETION_PREFIX}lb"
    path = resource_path(CORE, "nodes", name=node)
    await kube.patch(path, {"metadata": {"annotations": {key: "draining"}}})

    async def load_balancer_done() -> None:
        await kube.patch(path, {"metadata": {"annotations": {key: None}}})

    act, asked = actuator(kube, load_balancer_done)
    assert await act.wait_for_delay_deletion(node) is True
    assert len(asked) == 1 and asked[0] == 5.0  # polled again after the annotation went
