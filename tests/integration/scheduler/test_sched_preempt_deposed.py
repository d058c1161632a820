"""A replica that stops leading between a preemption decision and its writes deletes nothing.

The binder checks leadership just before each binding; the preemptor's writes (nominating the
preemptor, marking and deleting each victim) run in a background task and must check it too,
or a leader frozen past its Lease (the fault campaign's SIGSTOP, bench/chaos.py) wakes up and
deletes pods for a decision the new leader never made. Upstream kube-scheduler stops acting
when it loses the Lease (``leaderelection.LeaderCallbacks.OnStoppedLeading`` exits the
process, cmd/kube-scheduler/app/server.go ``Run``); berthmaster checks before each write.
"""

from __future__ import annotations

from typing import Any

from berthmaster.kube import KubeClient
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
