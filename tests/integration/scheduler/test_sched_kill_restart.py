"""``berthmaster scheduler`` as a process: SIGKILL mid-run, restart, every pod bound once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.scheduler.schedkit import create_pod, events_for, make_pod
from tests.support.waiting import wait_for


def start(kubeconfig: str, name: str, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    # A low client QPS makes the run last long enough to be killed in the middle of it.
    command = [*BERTHMASTER_CLI, "scheduler", "--kubeconfig", kubeconfig,
               "--scheduler-name", name, "--metrics-bind-address", "",
               "--leader-elect-lease-namespace", namespace, "--leader-elect-lease-name", name,
               "--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
               "--leader-elect-retry-period", "1",
               "--kube-api-qps", "15", "--kube-api-burst", "5"]
    return subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


async def bound_names(kube: KubeClient, namespace: str) -> set[str]:
    pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
    return {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}


async def test_sigkill_and_restart_binds_every_pod_exactly_once(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any, tmp_path: Path
) -> None:
    for _ in range(4):
        await nodes.create()
    name = f"bm-{uuid.uuid4().hex[:6]}"
    log = tmp_path / "scheduler.log"
    names = [f"p-{i}" for i in range(120)]
    for pod in names:
        await create_pod(kube, namespace, make_pod(pod, name))

    first = start(str(cluster.kubeconfig), name, namespace, log)
    try:
        await wait_for(lambda: _some_bound(kube, namespace, 15), timeout=60,
                       what="the first scheduler bound some pods")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        await asyncio.sleep(1)  # a bind the killed process had already sent lands first
        partial = await bound_names(kube, namespace)
        assert len(partial) < len(names), "killed too late to test a restart mid-run"
    finally:
        if first.poll() is None:
            first.kill()

    second = start(str(cluster.kubeconfig), name, namespace, log)
    try:
        await wait_for(lambda: _some_bound(kube, namespace, len(names)), timeout=90,
                       what="every pod bound after the restart")
        await wait_for(lambda: _events_cover(kube, namespace, set(names) - partial), timeout=60,
                       what="a Scheduled Event for every pod the second process bound")
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()

    pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
    node_by_pod = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    events: dict[str, list[str]] = {}
    for event in await events_for(kube, namespace, "Scheduled"):
        events.setdefault(event["involvedObject"]["name"], []).extend(
            [event["message"]] * int(event.get("count") or 1))
    # A bind whose Event was still queued in the killed process leaves no Event (events are
    # best effort, as kube-scheduler's broadcaster's); no bind may leave two, and every pod the
    # second process bound has its Event (it drains its queue on SIGTERM).
    assert all(len(messages) == 1 for messages in events.values()), events
    assert set(names) - partial <= set(events), sorted(set(names) - partial - set(events))
    for pod, (message,) in events.items():
        assert message == f"Successfully assigned {namespace}/{pod} to {node_by_pod[pod]}"


async def _some_bound(kube: KubeClient, namespace: str, at_least: int) -> bool:
    return len(await bound_names(kube, namespace)) >= at_least


async def _events_cover(kube: KubeClient, namespace: str, pods: set[str]) -> bool:
    return pods <= {e["involvedObject"]["name"] for e in await events_for(kube, namespace,
                                                                         "Scheduled")}
