"""Draining a Machine's Node on a real control plane: PodDisruptionBudgets, the
exclude-node-draining annotation, DaemonSet pods, control-plane nodes, and the opt-in drain
timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient, KubeError, resource_path
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    DRAIN_ATTEMPT_SECONDS,
    OperatorPool,
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    node_or_none,
    running_machine,
    running_operator,
)
from tests.support.builders import for_create, make_pod
from tests.support.chaos import make_node_unreachable
from tests.support.waiting import wait_for

HOLD = "berthmaster.io/test-hold"


def pod(name: str, node: str, labels: dict[str, str], owner: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    body = for_create(make_pod(name, node_name=node, labels=labels, image="busybox"))
    if owner:
        body["metadata"]["ownerReferences"] = [owner]
    return body


async def pods_named(kube: KubeClient, namespace: str) -> set[str]:
    items, _ = await kube.list_all(resource_path("/api/v1", "pods", namespace))
    return {p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")}


async def pdb(kube: KubeClient, namespace: str, min_available: int) -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}
    path = resource_path("/apis/policy/v1", "poddisruptionbudgets", namespace)
    try:
        await kube.create(path, body)
    except KubeError as error:
        if not error.conflict:
            raise
        await kube.patch(resource_path("/apis/policy/v1", "poddisruptionbudgets", namespace,
                                       "web"), {"spec": {"minAvailable": min_available}})


async def pdb_settled(kube: KubeClient, namespace: str, healthy: int) -> None:
    async def observed() -> bool:
        found = await kube.get(resource_path("/apis/policy/v1", "poddisruptionbudgets",
                                             namespace, "web"))
        return (found.get("status") or {}).get("currentHealthy") == healthy
    await wait_for(observed, timeout=60, what=f"PDB web sees {healthy} healthy pods")


async def machine_with_web_pods(kube: KubeClient, namespace: str, name: str,
                                annotations: dict[str, str] | None = None) -> None:
    await kube.create(api.machine_path(namespace), kwok_machine(name, annotations=annotations))
    await running_machine(kube, namespace, name)
    for index in range(2):
        await kube.create(resource_path("/api/v1", "pods", namespace),
                          pod(f"web-{index}", name, {"app": "web"}))


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


async def gone(kube: KubeClient, namespace: str, name: str) -> None:
    async def machine_gone() -> bool:
        return await get_machine(kube, namespace, name) is None
    await wait_for(machine_gone, timeout=60, what=f"machine {name} deleted")


def global_timeout(namespace: str, pod_name: str, seconds: int = DRAIN_ATTEMPT_SECONDS) -> str:
    return (f'error when evicting pods/"{pod_name}" -n "{namespace}": global timeout reached: '
            f"{seconds}s")


@pytest.fixture
def upstream_drain_operator(operator_pool: OperatorPool, request: pytest.FixtureRequest
                            ) -> Iterator[OperatorProcess]:
    """The operator with upstream's drain attempt of 20 s, for a test whose budget must relent
    within one attempt (the PDB controller's status update takes a few seconds)."""
    yield from running_operator(operator_pool, request,
                                env={"BERTHMASTER_DRAIN_ATTEMPT_SECONDS": "20"})


async def machine_with_drain_error(kube: KubeClient, namespace: str, name: str
                                   ) -> dict[str, Any]:
    """The Machine once its Drained condition says DrainError. The DrainRequeued event is
    recorded before the reconcile writes the status (drainNode's eventRecorder call precedes
    the condition update in machine-api-operator too), so the condition may lag the event."""
    async def failed() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        return machine if condition(machine, "Drained").get("reason") == "DrainError" else None

    return await wait_for(failed, timeout=30, what="Drained=False/DrainError")


async def test_drain_blocked_by_pdb_retries_until_it_allows(
        kube: KubeClient, namespace: str, upstream_drain_operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    """k8s.io/kubectl pkg/drain/drain.go, Helper.evictPods, with the Timeout of 20 s that
    openshift/machine-api-operator pkg/controller/machine/drain_controller.go drainNode sets:
    an eviction the PodDisruptionBudget refuses (429) is retried until the attempt's global
    timeout, then reported per pod as ``global timeout reached: 20s`` and aggregated
    (apimachinery utilerrors.NewAggregate: ``[a, b]``); the drain controller's DrainRequeued
    event and Drained condition carry it. A budget that relents during a later attempt lets
    that same attempt finish: no further DrainRequeued. drainNode then posts ``Deleted``
    (``Node "<name>" drained``) before DrainSucceeded."""
    name = f"{namespace}-pdb"
    cleanup_nodes.append(name)
    await machine_with_web_pods(kube, namespace, name)
    await pdb(kube, namespace, 2)
    await pdb_settled(kube, namespace, 2)
    await kube.delete(api.machine_path(namespace, name))

    async def requeued() -> dict[str, Any] | None:
        events = await machine_events(kube, namespace, name)
        return events if "DrainRequeued" in events else None

    events = await wait_for(requeued, timeout=90, what="a DrainRequeued attempt")
    refused = (f"[{global_timeout(namespace, 'web-0', 20)}, "
               f"{global_timeout(namespace, 'web-1', 20)}]")
    assert events["DrainRequeued"]["message"] == f"Node drain requeued: {refused}"
    drained = condition(await machine_with_drain_error(kube, namespace, name), "Drained")
    assert (drained["status"], drained["reason"], drained["message"]) == (
        "False", "DrainError", f"could not drain machine: {refused}")
    assert {"web-0", "web-1"} <= await pods_named(kube, namespace)
    assert (await kube.get(api.node_path(name)))["spec"]["unschedulable"] is True
    assert "Deleted" not in events

    async def second_attempt() -> bool:
        events = await machine_events(kube, namespace, name)
        return events.get("DrainProceeds", {}).get("count", 0) >= 2

    await wait_for(second_attempt, timeout=60, what="the second drain attempt")
    await asyncio.sleep(1)  # its first evictions have been refused by now
    await pdb(kube, namespace, 0)  # the budget now allows the evictions
    await gone(kube, namespace, name)
    assert await node_or_none(kube, name) is None
    events = await machine_events(kube, namespace, name)
    assert {reason: events[reason]["count"] for reason in
            ("DrainProceeds", "DrainRequeued", "DrainSucceeded", "Deleted")} == {
        "DrainProceeds": 2, "DrainRequeued": 1, "DrainSucceeded": 1, "Deleted": 1}
    assert events["Deleted"]["message"] == f'Node "{name}" drained'
    assert events["Deleted"]["source"]["component"] == "machine-drain-controller"


async def test_control_plane_node_waits_while_another_is_cordoned(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    """openshift/machine-api-operator pkg/controller/machine/drain_controller.go,
    isDrainAllowed: a control-plane Machine's Node is neither cordoned nor drained while
    another control-plane Node is cordoned (it may be being drained; two at once can cost etcd
    quorum). drainNode reports ``drain not permitted: requeue in: 20s`` and the drain is tried
    again 20 s later (RequeueAfterError), when it proceeds once the other Node is back."""
    name, other = f"{namespace}-cp-a", f"{namespace}-cp-b"
    cleanup_nodes.extend([name, other])
    body = kwok_machine(name)
    body["spec"]["metadata"]["labels"] = {"node-role.kubernetes.io/master": ""}
    await kube.create(api.machine_path(namespace), body)
    await running_machine(kube, namespace, name)
    await kube.create(resource_path("/api/v1", "pods", namespace), pod("etcd-guard", name, {}))
    await kube.create(api.node_path(), {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": other, "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"unschedulable": True}})
    await kube.delete(api.machine_path(namespace, name))

    async def requeued() -> dict[str, Any] | None:
        events = await machine_events(kube, namespace, name)
        return events if "DrainRequeued" in events else None

    events = await wait_for(requeued, timeout=60, what="the drain not permitted")
    assert events["DrainRequeued"]["message"] == (
        "Node drain requeued: drain not permitted: requeue in: 20s")
    machine = await machine_with_drain_error(kube, namespace, name)
    drained = condition(machine, "Drained")
    assert (drained["status"], drained["reason"], drained["message"]) == (
        "False", "DrainError", "could not drain machine: drain not permitted: requeue in: 20s")
    progress = (machine or {})["status"]["deletionProgress"]
    assert (stamp(progress["nextDrainAttemptAt"]) - stamp(progress["lastDrainAttemptAt"])
            ).total_seconds() == 20
    assert not (await kube.get(api.node_path(name)))["spec"].get("unschedulable")
    assert "etcd-guard" in await pods_named(kube, namespace)

    await kube.patch(api.node_path(other), {"spec": {"unschedulable": False}})
    await gone(kube, namespace, name)
    events = await machine_events(kube, namespace, name)
    assert (events["DrainProceeds"]["count"], events["DrainRequeued"]["count"]) == (2, 1)
    assert events["DrainSucceeded"]["count"] == 1


async def test_exclude_node_draining_skips_the_drain(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-nodrain"
    cleanup_nodes.append(name)
    await machine_with_web_pods(kube, namespace, name,
                                annotations={api.EXCLUDE_NODE_DRAINING: ""})
    await pdb(kube, namespace, 2)  # would block a drain, if there were one
    await kube.delete(api.machine_path(namespace, name))
    await gone(kube, namespace, name)
    events = await machine_events(kube, namespace, name)
    assert events["DrainSkipped"]["message"] == "Node drain skipped"
    assert not {"DrainProceeds", "DrainRequeued", "DrainSucceeded"} & set(events)
    assert await node_or_none(kube, name) is None


async def test_exclude_node_draining_skips_the_pre_drain_hooks_too(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    """machine-api-operator pkg/controller/machine/drain_controller.go ``Reconcile`` checks the
    exclude-node-draining annotation (and ``status.nodeRef``) before the preDrain hooks: an
    excluded Machine is marked Drained ("Node drain skipped") with its preDrain hook still
    there, and its deletion goes on (here to the preTerminate hook, which still holds)."""
    name = f"{namespace}-nodrain-hooked"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace),
                      kwok_machine(name, annotations={api.EXCLUDE_NODE_DRAINING: ""}))
    await running_machine(kube, namespace, name)
    await kube.patch(api.machine_path(namespace, name), {"spec": {"lifecycleHooks": {
        "preDrain": [{"name": "Hold", "owner": "the-test"}],
        "preTerminate": [{"name": "Inspect", "owner": "the-test"}]}}})
    await kube.delete(api.machine_path(namespace, name))

    async def drained() -> bool:
        found = await get_machine(kube, namespace, name)
        return condition(found, "Drained").get("status") == "True"

    await wait_for(drained, timeout=60, what="Drained True despite the preDrain hook")
    found = await get_machine(kube, namespace, name)
    assert condition(found, "Drained")["message"] == "Node drain skipped"
    assert found is not None and found["spec"]["lifecycleHooks"]["preDrain"]
    events = await machine_events(kube, namespace, name)
    assert "DrainSkipped" in events and "DrainBlocked" not in events
    await kube.patch(api.machine_path(namespace, name),
                     {"spec": {"lifecycleHooks": {"preTerminate": []}}})
    await gone(kube, namespace, name)


async def test_mirror_pods_are_left_and_others_evicted(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    # (DaemonSet pods take the same path in the drain plan; without a kube-scheduler here a
    # DaemonSet cannot place a pod on a kwok node, so the unit tests cover that case.)
    name = f"{namespace}-mirror"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    await running_machine(kube, namespace, name)
    mirror = pod("static-x", name, {"app": "static"})
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    await kube.create(resource_path("/api/v1", "pods", namespace), mirror)
    await kube.create(resource_path("/api/v1", "pods", namespace), pod("app", name, {}))
    await kube.patch(api.machine_path(namespace, name), {"spec": {"lifecycleHooks": {
        "preTerminate": [{"name": "Inspect", "owner": "the-test"}]}}})
    await kube.delete(api.machine_path(namespace, name))

    async def drained() -> bool:
        found = await get_machine(kube, namespace, name)
        return condition(found, "Drained").get("status") == "True"

    await wait_for(drained, timeout=60, what="Drained True")
    remaining = await pods_named(kube, namespace)
    assert "app" not in remaining and "static-x" in remaining
    await kube.patch(api.machine_path(namespace, name),
                     {"spec": {"lifecycleHooks": {"preTerminate": []}}})
    await gone(kube, namespace, name)


async def test_drain_timeout_reports_then_proceeds_only_when_opted_in(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-timeout"
    cleanup_nodes.append(name)
    await machine_with_web_pods(kube, namespace, name,
                                annotations={api.DRAIN_TIMEOUT: "3s"})
    await pdb(kube, namespace, 2)
    await pdb_settled(kube, namespace, 2)
    await kube.delete(api.machine_path(namespace, name))

    async def timed_out() -> dict[str, Any] | None:
        found = await get_machine(kube, namespace, name)
        drained = condition(found, "Drained")
        return drained if drained.get("reason") == "DrainTimeout" else None

    drained = await wait_for(timed_out, timeout=60, what="Drained False/DrainTimeout")
    assert drained["status"] == "False"
    assert drained["message"].startswith("Drain did not finish within 3s; still retrying")
    events = await machine_events(kube, namespace, name)
    assert events["DrainTimedOut"]["type"] == "Warning"
    # not opted in: the drain goes on after the timeout (a further attempt is recorded, as
    # upstream's drain keeps retrying) and the Machine stays
    progress = (await get_machine(kube, namespace, name) or {})["status"]["deletionProgress"]
    before = int(progress["drainAttempts"])

    async def retried() -> bool:
        machine = await get_machine(kube, namespace, name)
        done = ((machine or {}).get("status") or {}).get("deletionProgress") or {}
        return machine is not None and int(done.get("drainAttempts") or 0) > before

    await wait_for(retried, timeout=90, what="a drain attempt after the timeout")
    assert await get_machine(kube, namespace, name) is not None

    await kube.patch(api.machine_path(namespace, name), {"metadata": {"annotations": {
        api.PROCEED_AFTER_DRAIN_TIMEOUT: "true"}}})
    await gone(kube, namespace, name)
    assert await node_or_none(kube, name) is None


async def test_drain_of_an_unreachable_node_does_not_wait_for_pods_that_cannot_terminate(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    """Upstream's unreachable-node drain: the kubelet is gone (kwok no longer manages the node,
    the node-lifecycle controller set Ready=Unknown), so an evicted pod stays Terminating for
    ever; the drain evicts with a 1 s grace period and counts pods terminating for longer as
    gone, instead of failing until a timeout."""
    name = f"{namespace}-unreachable"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    await running_machine(kube, namespace, name)
    held = pod("web-0", name, {"app": "web"})
    # A finalizer keeps the evicted pod Terminating, as a missing kubelet would: a drain of a
    # reachable node would wait for it to go; the unreachable-node drain must not.
    held["metadata"]["finalizers"] = [HOLD]
    await kube.create(resource_path("/api/v1", "pods", namespace), held)

    async def running_pod() -> bool:
        found = await kube.get(resource_path("/api/v1", "pods", namespace, "web-0"))
        return (found.get("status") or {}).get("phase") == "Running"

    await wait_for(running_pod, timeout=30, what="web-0 Running")
    await make_node_unreachable(kube, name)
    await kube.patch(api.machine_path(namespace, name), {"spec": {"lifecycleHooks": {
        "preTerminate": [{"name": "Inspect", "owner": "the-test"}]}}})
    await kube.delete(api.machine_path(namespace, name))

    async def drained() -> dict[str, Any] | None:
        found = await get_machine(kube, namespace, name)
        drained = condition(found, "Drained")
        return drained if drained.get("status") == "True" else None

    await wait_for(drained, timeout=90, what="Drained True on the unreachable node")
    stuck = await kube.get(resource_path("/api/v1", "pods", namespace, "web-0"))
    # evicted, and still Terminating (held by the finalizer): a drain of a reachable node
    # would still be waiting for it to go
    assert stuck["metadata"].get("deletionTimestamp")
    events = await machine_events(kube, namespace, name)
    assert events["DrainSucceeded"]["count"] == 1
    await kube.patch(resource_path("/api/v1", "pods", namespace, "web-0"),
                     {"metadata": {"finalizers": None}})
    await kube.patch(api.machine_path(namespace, name),
                     {"spec": {"lifecycleHooks": {"preTerminate": []}}})
    await gone(kube, namespace, name)
    assert await node_or_none(kube, name) is None
