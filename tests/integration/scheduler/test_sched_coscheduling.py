"""Coscheduling on the real API server: a PodGroup's pods bind all together or not at all.

Semantics as kubernetes-sigs/scheduler-plugins pkg/coscheduling/coscheduling.go and
pkg/coscheduling/core/core.go (PreFilter's quorum, Permit's Wait until minMember are placed,
Unreserve rejecting the waiting siblings); the waiting itself is kube-scheduler's
(pkg/scheduler/framework/runtime/framework.go RunPermitPlugins / WaitOnPermit,
runtime/waiting_pods_map.go: ``rejected due to timeout after waiting <d> at plugin <name>``).
The PodGroup CRD is deploy/crds/scheduling.x-k8s.io_podgroups.yaml; its status is the
operator's podgroups capability's (scheduler-plugins pkg/controllers/podgroup_controller.go).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.config import load_config
from tests.integration.scheduler.schedkit import create_pod, events_for, make_pod, node_of
from tests.support.crds import install_crd
from tests.support.operator_process import running_operator
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "deploy/crds/scheduling.x-k8s.io_podgroups.yaml"
EXAMPLE = ROOT / "examples/coscheduling/scheduler-config.yaml"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SLOT = {"cpu": "1", "memory": "8Gi", "pods": "110"}  # one 600m gang pod per node


@pytest.fixture
def crd(cluster: Any) -> None:
    install_crd(cluster, CRD)


def _podgroups(namespace: str) -> str:
    return resource_path(group_path("scheduling.x-k8s.io", "v1alpha1"), "podgroups", namespace)


async def _podgroup(kube: KubeClient, namespace: str, name: str, min_member: int,
                    timeout: int = 3) -> dict[str, Any]:
    return await kube.create(_podgroups(namespace), {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout}})


def _config(name: str) -> str:
    """examples/coscheduling/scheduler-config.yaml (scheduler-plugins' documented profile),
    with the test's schedulerName and a 3 s Permit wait."""
    return (EXAMPLE.read_text().replace("schedulerName: berthmaster", f"schedulerName: {name}")
            .replace("permitWaitingTimeSeconds: 60", "permitWaitingTimeSeconds: 3"))


async def _start(run_scheduler: Any) -> Any:
    return await run_scheduler.start(load_config(_config(run_scheduler.name), "coscheduling"))


async def _gang(kube: KubeClient, namespace: str, scheduler: str, group: str, size: int,
                selector: dict[str, str]) -> list[str]:
    names = [f"{group}-{i}" for i in range(size)]
    for name in names:
        await create_pod(kube, namespace, make_pod(name, scheduler, cpu="600m",
                                                   labels={GROUP_LABEL: group},
                                                   nodeSelector=selector))
    return names


async def _bound(kube: KubeClient, namespace: str, names: list[str]) -> list[str]:
    return [name for name in names if await node_of(kube, namespace, name)]


async def _failed_with(kube: KubeClient, namespace: str, text: str) -> list[dict[str, Any]]:
    return [e for e in await events_for(kube, namespace, "FailedScheduling")
            if text in e["message"]]


async def test_a_gang_binds_all_together_or_none(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any, crd: None) -> None:
    """A group of 3 with room for 2 binds none (its pods wait at Permit, time out and give the
    room back); a pod of no group binds meanwhile; a third node lets all 3 bind."""
    selector = {"berthmaster.test/gang": uuid.uuid4().hex[:8]}
    for _ in range(2):
        await nodes.create(labels=selector, capacity=SLOT)
    sched = await _start(run_scheduler)
    await _podgroup(kube, namespace, "trio", 3)
    gang = await _gang(kube, namespace, sched.name, "trio", 3, selector)

    # the group waited at Permit and was rejected as a whole (its unplaceable third pod's
    # PostFilter rejects the waiting two, or the wait times out), each rejected pod left with a
    # FailedScheduling event
    async def group_rejected() -> list[dict[str, Any]]:
        return [e for e in await events_for(kube, namespace, "FailedScheduling")
                if "optimistic rejection in PostFilter" in e["message"]
                or "at plugin Coscheduling" in e["message"]]

    (await wait_for(group_rejected, timeout=60, what="the waiting pods rejected"))
    assert await _bound(kube, namespace, gang) == []

    # a pod of no group is scheduled as ever, on the same nodes
    await create_pod(kube, namespace, make_pod("solo", sched.name, nodeSelector=selector))
    assert await wait_for(lambda: node_of(kube, namespace, "solo"), timeout=30,
                          what="solo bound")
    assert await _bound(kube, namespace, gang) == []

    await nodes.create(labels=selector, capacity=SLOT)

    async def all_bound() -> bool:
        return len(await _bound(kube, namespace, gang)) == 3

    assert await wait_for(all_bound, timeout=90, what="the gang bound")
    placed = {await node_of(kube, namespace, name) for name in gang}
    assert len(placed) == 3


async def test_two_competing_gangs_never_deadlock(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any, crd: None) -> None:
    """Room for 3, two groups of 3: one group binds whole, the other none; once the first
    goes, the second binds whole."""
    selector = {"berthmaster.test/gang": uuid.uuid4().hex[:8]}
    for _ in range(3):
        await nodes.create(labels=selector, capacity=SLOT)
    sched = await _start(run_scheduler)
    await _podgroup(kube, namespace, "red", 3)
    await _podgroup(kube, namespace, "blue", 3)
    red = await _gang(kube, namespace, sched.name, "red", 3, selector)
    blue = await _gang(kube, namespace, sched.name, "blue", 3, selector)

    async def a_winner() -> list[str] | None:
        for gang in (red, blue):
            if len(await _bound(kube, namespace, gang)) == 3:
                return gang
        return None

    winner = await wait_for(a_winner, timeout=120, what="one whole gang bound")
    loser = blue if winner is red else red
    assert await _bound(kube, namespace, loser) == []
    for name in winner:
        await kube.delete(resource_path("/api/v1", "pods", namespace, name))

    async def loser_bound() -> bool:
        return len(await _bound(kube, namespace, loser)) == 3

    assert await wait_for(loser_bound, timeout=120, what="the other gang bound")


async def test_bad_groups_are_named_and_other_pods_go_on(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any, crd: None) -> None:
    """minMember 0 is refused by the CRD's rule; a pod naming a missing PodGroup, or with an
    empty group label, gets a FailedScheduling that says what to fix; other pods bind."""
    with pytest.raises(KubeError) as refused:
        await _podgroup(kube, namespace, "empty", 0)
    assert refused.value.status == 422
    assert "spec.minMember: Invalid value" in str(refused.value.message)
    assert "must be at least 1" in str(refused.value.message)

    selector = {"berthmaster.test/gang": uuid.uuid4().hex[:8]}
    await nodes.create(labels=selector, capacity=SLOT)
    sched = await _start(run_scheduler)
    await create_pod(kube, namespace, make_pod("orphan", sched.name, nodeSelector=selector,
                                               labels={GROUP_LABEL: "nowhere"}))
    await create_pod(kube, namespace, make_pod("blank", sched.name, nodeSelector=selector,
                                               labels={GROUP_LABEL: ""}))
    (missing,) = await wait_for(lambda: _failed_with(kube, namespace, "PodGroup not found"),
                                timeout=30, what="FailedScheduling for orphan")
    assert missing["involvedObject"]["name"] == "orphan"
    assert (f'PodGroup not found: "{namespace}/nowhere" (named by the pod\'s label '
            f'"{GROUP_LABEL}"); create the PodGroup or correct the label') in missing["message"]
    (blank,) = await wait_for(lambda: _failed_with(kube, namespace, "is empty"), timeout=30,
                              what="FailedScheduling for blank")
    assert blank["involvedObject"]["name"] == "blank"
    assert (f'pod label "{GROUP_LABEL}" is empty: set it to the name of a PodGroup in '
            f'namespace "{namespace}", or remove the label') in blank["message"]

    await create_pod(kube, namespace, make_pod("solo", sched.name, nodeSelector=selector))
    assert await wait_for(lambda: node_of(kube, namespace, "solo"), timeout=30,
                          what="solo bound")

    # the missing group appears: its pod is retried on the PodGroup/Add event and binds
    await _podgroup(kube, namespace, "nowhere", 1)
    assert await wait_for(lambda: node_of(kube, namespace, "orphan"), timeout=30,
                          what="orphan bound")


@pytest.fixture
async def status_keeper(cluster: Any, crd: None, namespace: str, tmp_path: Path
                        ) -> AsyncIterator[None]:
    """The operator with the podgroups capability alone, watching the test's namespace."""
    async with running_operator(str(cluster.kubeconfig),
                                ["--only", "podgroups", "--namespace", namespace],
                                tmp_path / "operator.log"):
        yield


async def test_the_operator_keeps_a_gangs_status(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any,
        status_keeper: None) -> None:
    """Pending while the group lacks pods, then Running once kwok runs the bound gang, with
    the counts."""
    selector = {"berthmaster.test/gang": uuid.uuid4().hex[:8]}
    for _ in range(2):
        await nodes.create(labels=selector, capacity=SLOT)
    sched = await _start(run_scheduler)
    await _podgroup(kube, namespace, "duo", 2)
    path = f"{_podgroups(namespace)}/duo"

    async def phase(wanted: str) -> dict[str, Any] | None:
        status = (await kube.get(path)).get("status") or {}
        return status if status.get("phase") == wanted else None

    await wait_for(lambda: phase("Pending"), timeout=60, what="PodGroup Pending")
    await _gang(kube, namespace, sched.name, "duo", 2, selector)
    status = await wait_for(lambda: phase("Running"), timeout=90, what="PodGroup Running")
    assert (status["running"], status["scheduled"], status["failed"]) == (2, 2, 0)
