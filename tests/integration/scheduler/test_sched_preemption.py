"""Preemption end to end: nominate, evict lower-priority victims, then bind the preemptor."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path
from tests.integration.scheduler.schedkit import (
    create_pod,
    events_for,
    get_pod,
    make_pod,
    node_of,
)
from tests.support.waiting import wait_for

PRIORITY_CLASSES = resource_path(group_path("scheduling.k8s.io", "v1"), "priorityclasses")


async def priority_class(kube: KubeClient, value: int) -> str:
    name = f"bm-test-{value}-{uuid.uuid4().hex[:5]}"
    await kube.create(PRIORITY_CLASSES, {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value})
    return name


async def test_high_priority_pod_preempts_low_priority_pods(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    low = await priority_class(kube, 10)
    high = await priority_class(kube, 1000)
    try:
        node = await nodes.create(capacity={"cpu": "2", "memory": "4Gi", "pods": "110"})
        node_name = node["metadata"]["name"]
        sched = await run_scheduler.start()
        for i in range(2):
            await create_pod(kube, namespace, make_pod(f"low-{i}", sched.name, cpu="1",
                                                       priorityClassName=low))
        for i in range(2):
            await wait_for(lambda i=i: node_of(kube, namespace, f"low-{i}"), timeout=30,
                           what=f"low-{i} bound")
        nominated: set[str] = set()

        async def watch_nomination() -> None:
            # kwok rewrites the status once the pod runs, so the nomination is observed live.
            while True:
                with contextlib.suppress(KubeError):
                    pod = await get_pod(kube, namespace, "urgent")
                    if pod["status"].get("nominatedNodeName"):
                        nominated.add(pod["status"]["nominatedNodeName"])
                await asyncio.sleep(0.05)

        preemptor = await create_pod(kube, namespace, make_pod(
            "urgent", sched.name, cpu="2", priorityClassName=high))
        watcher = asyncio.create_task(watch_nomination())

        bound = await wait_for(lambda: node_of(kube, namespace, "urgent"), timeout=60,
                               what="urgent bound after preemption")
        assert bound == node_name
        watcher.cancel()
        assert nominated == {node_name}

        async def gone(name: str) -> bool:
            try:
                await get_pod(kube, namespace, name)
            except KubeError as error:
                return error.not_found
            return False

        for i in range(2):
            assert await wait_for(lambda i=i: gone(f"low-{i}"), timeout=30,
                                  what=f"victim low-{i} deleted")
        preempted = await events_for(kube, namespace, "Preempted")
        assert sorted(e["involvedObject"]["name"] for e in preempted) == ["low-0", "low-1"]
        for event in preempted:
            assert event["message"] == (f"Preempted by pod {preemptor['metadata']['uid']} "
                                        f"on node {node_name}")
        failed = [e for e in await events_for(kube, namespace, "FailedScheduling")
                  if e["involvedObject"]["name"] == "urgent"]
        assert failed and "Insufficient cpu" in failed[0]["message"]
    finally:
        for name in (low, high):
            with contextlib.suppress(KubeError):
                await kube.delete(f"{PRIORITY_CLASSES}/{name}")
