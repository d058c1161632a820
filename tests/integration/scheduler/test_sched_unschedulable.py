"""An unschedulable pod: what the user sees, and how it lands once the cluster can take it."""

from __future__ import annotations

import socket
from typing import Any

import aiohttp

from berthmaster.foundation.kube import KubeClient
from tests.integration.scheduler.schedkit import (
    create_pod,
    events_for,
    get_pod,
    make_pod,
    node_of,
)
from tests.support.waiting import wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_failed_scheduling_then_bound_when_a_fitting_node_arrives(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    await nodes.create(capacity={"cpu": "1", "memory": "2Gi", "pods": "110"})
    port = free_port()
    sched = await run_scheduler.start(metrics_bind_address=f"127.0.0.1:{port}")
    await create_pod(kube, namespace, make_pod("big", sched.name, cpu="3"))

    async def failed() -> list[dict[str, Any]]:
        return [e for e in await events_for(kube, namespace, "FailedScheduling")
                if e["involvedObject"]["name"] == "big"]

    (event,) = await wait_for(failed, timeout=30, what="FailedScheduling event for big")
    assert event["type"] == "Warning"
    assert event["source"]["component"] == sched.name
    assert event["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")

    async def condition() -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, "big")
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    scheduled = await wait_for(condition, timeout=30, what="PodScheduled condition on big")
    assert scheduled["status"] == "False"
    assert scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == event["message"]

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
            text = await response.text()
        async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
            assert response.status == 200
        async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
    assert (f'scheduler_schedule_attempts_total{{profile="{sched.name}",'
            f'result="unschedulable"}}') in text
    pending = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("scheduler_pending_pods{")}
    # Parked, or backing off when a cluster event (another test's pod deleted) may have helped.
    assert pending["unschedulable"] + pending["backoff"] + pending["active"] == 1.0, pending
    if pending["unschedulable"] == 1.0:
        assert (f'scheduler_unschedulable_pods{{plugin="NodeResourcesFit",'
                f'profile="{sched.name}"}} 1.0') in text

    bigger = await nodes.create(capacity={"cpu": "8", "memory": "16Gi", "pods": "110"})
    node = await wait_for(lambda: node_of(kube, namespace, "big"), timeout=30,
                          what="big bound after a fitting node was added")
    assert node == bigger["metadata"]["name"]

    async def scheduled_event() -> list[dict[str, Any]]:
        return [e for e in await events_for(kube, namespace, "Scheduled")
                if e["involvedObject"]["name"] == "big"]

    (done,) = await wait_for(scheduled_event, timeout=30, what="Scheduled event for big")
    assert done["message"] == f"Successfully assigned {namespace}/big to {node}"
    assert done["reportingComponent"] == sched.name
