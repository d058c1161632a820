"""Draining a Machine's Node on a real control plane: PodDisruptionBudgets, the
exclude-node-draining annotation, DaemonSet pods, and the opt-in drain timeout."""

from __future__ import annotations

import asyncio
from typing import Any

from berthmaster.kube import KubeClient, KubeError, resource_path
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    node_or_none,
    running_machine,
)
from tests.support.chaos import make_node_unreachable
from tests.support.waiting import wait_for

HOLD = "berthmaster.io/test-hold"
PDB_TEXT = "Cannot evict pod as it would violate the pod's disruption budget."


def pod(name: str, node: str, labels: dict[str, str], owner: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


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


async def gone(kube: KubeClient, namespace: str, name: str) -> None:
    async def machine_gone() -> bool:
        return await get_machine(kube, namespace, name) is None
    await wait_for(machine_gone, timeout=60, what=f"machine {name} deleted")


async def test_drain_blocked_by_pdb_retries_until_it_allows(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-pdb"
    cleanup_nodes.append(name)
    await machine_with_web_pods(kube, namespace, name)
    await pdb(kube, namespace, 2)
    await pdb_settled(kube, namespace, 2)
    await kube.delete(api.machine_path(namespace, name))

    async def retried_twice() -> dict[str, Any] | None:
        events = await machine_events(kube, namespace, name)
        requeued = events.get("DrainRequeued")
        return events if requeued and requeued["count"] >= 2 else None

    events = await wait_for(retried_twice, timeout=60, what="two DrainRequeued attempts")
    assert PDB_TEXT in events["DrainRequeued"]["message"]
    assert events["DrainRequeued"]["message"].startswith("Node drain requeued: ")
    machine = await get_machine(kube, namespace, name)
    drained = condition(machine, "Drained")
    assert (drained["status"], drained["reason"]) == ("False", "DrainError")
    assert drained["message"].startswith("could not drain machine: error when evicting pods/")
    assert PDB_TEXT in drained["message"]
    assert {"web-0", "web-1"} <= await pods_named(kube, namespace)
    assert machine is not None and machine["status"]["deletionProgress"]["drainAttempts"] >= 2
    assert (await kube.get(api.node_path(name)))["spec"]["unschedulable"] is True

    await pdb(kube, namespace, 0)  # the budget now allows the evictions
    await gone(kube, namespace, name)
    assert await node_or_none(kube, name) is None
    events = await machine_events(kube, namespace, name)
    assert events["DrainSucceeded"]["count"] == 1
    assert events["DrainProceeds"]["count"] == events["DrainRequeued"]["count"] + 1


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
    await asyncio.sleep(2)
    assert await get_machine(kube, namespace, name) is not None  # not opted in: still waiting

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
