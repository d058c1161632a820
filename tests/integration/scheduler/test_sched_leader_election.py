"""Two replicas with leader election: only the leader binds; the standby takes over; a leader
that loses its Lease stops at once."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.kube import KubeClient, group_path, resource_path
from berthmaster.foundation.times import format_rfc3339_micro
from tests.integration.scheduler.schedkit import create_pod, events_for, make_pod, node_of
from tests.support.waiting import wait_for


async def all_bound(kube: KubeClient, namespace: str, names: list[str]) -> bool:
    placed = await asyncio.gather(*(node_of(kube, namespace, n) for n in names))
    return all(placed)


async def scheduled_by(kube: KubeClient, namespace: str) -> dict[str, list[str]]:
    """pod name -> reportingInstance of each Scheduled event about it."""
    out: dict[str, list[str]] = {}
    for event in await events_for(kube, namespace, "Scheduled"):
        out.setdefault(event["involvedObject"]["name"], []).extend(
            [event["reportingInstance"]] * int(event.get("count") or 1))
    return out


async def test_only_the_leader_binds_and_the_standby_takes_over(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    for _ in range(3):
        await nodes.create()
    election = {"leader_elect": True, "leader_elect_lease_namespace": namespace,
                "leader_elect_lease_name": "berthmaster-test"}
    a = await run_scheduler.start(leader_elect_identity="replica-a", **election)
    await wait_for(lambda: a.service.leading.is_set(), timeout=30, what="replica-a leading")
    b = await run_scheduler.start(leader_elect_identity="replica-b", **election)
    await wait_for(lambda: b.service.cache.synced, timeout=30, what="replica-b cache synced")

    first = [f"first-{i}" for i in range(30)]
    for name in first:
        await create_pod(kube, namespace, make_pod(name, a.name))
    await wait_for(lambda: all_bound(kube, namespace, first), timeout=60,
                   what="first batch bound")
    assert b.service.binder.bound == 0 and not b.service.leading.is_set()
    assert a.service.binder.bound == len(first)

    assert await a.stop() == 0  # graceful: releases the Lease
    await wait_for(lambda: b.service.leading.is_set(), timeout=15, what="replica-b took over")
    second = [f"second-{i}" for i in range(20)]
    for name in second:
        await create_pod(kube, namespace, make_pod(name, a.name))
    await wait_for(lambda: all_bound(kube, namespace, first + second), timeout=60,
                   what="second batch bound")

    by = await wait_for(lambda: _complete(kube, namespace, len(first) + len(second)),
                        timeout=30, what="a Scheduled event per pod")
    assert all(len(instances) == 1 for instances in by.values()), by
    assert {by[n][0] for n in first} == {"replica-a"}
    assert {by[n][0] for n in second} == {"replica-b"}


async def _complete(kube: KubeClient, namespace: str, count: int) -> dict[str, list[str]] | None:
    by = await scheduled_by(kube, namespace)
    return by if len(by) == count else None


async def test_leader_that_loses_its_lease_stops_at_once(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    await nodes.create()
    election = {"leader_elect": True, "leader_elect_lease_namespace": namespace,
                "leader_elect_lease_name": "berthmaster-test"}
    a = await run_scheduler.start(leader_elect_identity="replica-a", **election)
    await wait_for(lambda: a.service.leading.is_set(), timeout=30, what="replica-a leading")
    await create_pod(kube, namespace, make_pod("before", a.name))
    await wait_for(lambda: node_of(kube, namespace, "before"), timeout=30, what="before bound")

    # Someone else takes the Lease (as after a network partition healed in their favour).
    path = resource_path(group_path("coordination.k8s.io", "v1"), "leases", namespace,
                         "berthmaster-test")
    lease = await kube.get(path)
    stamp = format_rfc3339_micro(datetime.now(UTC))
    lease["spec"].update({"holderIdentity": "intruder", "renewTime": stamp,
                          "acquireTime": stamp,
                          "leaseTransitions": lease["spec"].get("leaseTransitions", 0) + 1})
    await kube.replace(path, lease)

    assert await asyncio.wait_for(a.task, timeout=15) == 1  # exits like kube-scheduler
    await create_pod(kube, namespace, make_pod("after", a.name))
    await asyncio.sleep(3)
    assert await node_of(kube, namespace, "after") is None
    instances = Counter(i for v in (await scheduled_by(kube, namespace)).values() for i in v)
    assert instances == {"replica-a": 1}
