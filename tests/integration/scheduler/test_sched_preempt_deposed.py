"""A replica that stops leading between a preemption decision and its writes deletes nothing.

The binder checks leadership just before each binding; the preemptor's writes (nominating the
preemptor, marking and deleting each victim) run in a background task and must check it too,
or a leader frozen past its Lease (the fault campaign's SIGSTOP, bench/chaos.py) wakes up and
deletes pods for a decision the new leader never made. Upstream kube-scheduler stops acting
when it loses the Lease (``leaderelection.LeaderCallbacks.OnStoppedLeading`` exits the
process, cmd/kube-scheduler/app/server.go ``Run``); berthmaster checks before each write.
"""

from __future__ import annotations

import asyncio
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.scheduler.daemon.events import EventRecorder
from berthmaster.scheduler.daemon.preempt import Preemptor
from tests.integration.scheduler.schedkit import create_pod, get_pod, make_pod


async def test_a_deposed_leader_neither_nominates_nor_deletes_victims(
        kube: KubeClient, namespace: str, nodes: Any) -> None:
    node = (await nodes.create())["metadata"]["name"]
    victim = make_pod("victim", "bm-deposed")
    victim["spec"]["nodeName"] = node
    victim = await create_pod(kube, namespace, victim)
    preemptor = await create_pod(kube, namespace, make_pod("preemptor", "bm-deposed"))
    leading = [True]
    recorder = EventRecorder(kube, "bm-deposed", "replica-a")
    acting = Preemptor(kube, recorder, "bm-deposed", may_act=lambda: leading[0])

    acting.preempt(preemptor, node, [victim])
    leading[0] = False  # the Lease is lost before the background task has written anything
    await acting.wait_idle()

    assert not (await get_pod(kube, namespace, "victim"))["metadata"].get("deletionTimestamp")
    assert not (await get_pod(kube, namespace, "preemptor")).get("status", {}).get(
        "nominatedNodeName")

    leading[0] = True  # the same decision made by a leader goes through
    acting.preempt(preemptor, node, [victim])
    await acting.wait_idle()
    assert (await get_pod(kube, namespace, "preemptor"))["status"]["nominatedNodeName"] == node


async def test_a_leader_deposed_while_waiting_for_a_token_writes_nothing(
        kube: KubeClient, cluster: Any, namespace: str, nodes: Any) -> None:
    """Leadership is asked again after the client's rate limiter wait, right before each write
    (the request's ``fence``, berthmaster/foundation/kube.py), not once before the wait: a replica
    whose
    Lease lapses while its preemption waits for a token neither nominates, nor marks, nor
    deletes. (client-go's token bucket, util/flowcontrol/throttle.go, makes such waits; the
    leader stops acting as soon as it loses the Lease, client-go
    tools/leaderelection/leaderelection.go ``renew``.)"""
    node = (await nodes.create())["metadata"]["name"]
    victim = make_pod("victim", "bm-deposed")
    victim["spec"]["nodeName"] = node
    victim = await create_pod(kube, namespace, victim)
    preemptor = await create_pod(kube, namespace, make_pod("preemptor", "bm-deposed"))
    # one token every 5 s, none left: the preemption's first write waits about 5 s for it
    slow = await KubeClient.from_kubeconfig(str(cluster.kubeconfig), qps=0.2, burst=1)
    try:
        await slow.get(resource_path(CORE, "namespaces", name=namespace))
        assert slow._limiter is not None and slow._limiter.delay() > 1.0
        leading = [True]
        recorder = EventRecorder(kube, "bm-deposed", "replica-a")
        acting = Preemptor(slow, recorder, "bm-deposed", may_act=lambda: leading[0])
        acting.preempt(preemptor, node, [victim])
        await asyncio.sleep(0)  # the task starts, still leading, and queues for a token
        await asyncio.sleep(0)
        leading[0] = False  # the Lease lapses while it waits
        await acting.wait_idle()
    finally:
        await slow.close()

    after = await get_pod(kube, namespace, "victim")
    assert not after["metadata"].get("deletionTimestamp")
    assert not any(c.get("type") == "DisruptionTarget"
                   for c in (after.get("status") or {}).get("conditions") or [])
    assert not (await get_pod(kube, namespace, "preemptor")).get("status", {}).get(
        "nominatedNodeName")
