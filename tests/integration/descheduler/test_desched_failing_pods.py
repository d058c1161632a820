"""`berthmaster deschedule` against pods that failed or keep restarting, and a NotReady node.

kwok never fails or restarts a pod on its own: the local control plane's chaos Stages do it for
labelled objects (tests/support/chaos.py), so RemoveFailedPods and
RemovePodsHavingTooManyRestarts decide here on statuses the API server really holds.
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from tests.integration.conftest import NodeFactory
from tests.integration.descheduler.kit import (
    events_for,
    make_owner,
    make_pod,
    remaining,
    run_pass,
    v1alpha2,
    wait_running,
)
from tests.support.chaos import fail_pod, make_node_not_ready, restart_pod
from tests.support.waiting import wait_for

APPS = group_path("apps", "v1")


async def evicted_by(kube: KubeClient, namespace: str, strategy: str,
                     output: str) -> set[str]:
    """The pods the strategy's Descheduled Events name (waited for: one at least)."""

    async def named() -> set[str]:
        return {e["regarding"]["name"] for e in await events_for(kube, namespace)
                if e["reason"] == strategy}

    return await wait_for(named, what=f"{strategy} Events after:\n{output}")


async def replicaset_pods(kube: KubeClient, namespace: str, node: str, replicas: int
                          ) -> list[str]:
    """A ReplicaSet whose pods are bound to ``node``; returns their names once Running."""
    await kube.create(resource_path(APPS, "replicasets", namespace), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "nodeName": node,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}})

    async def running() -> list[str] | None:
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
        names = [p["metadata"]["name"] for p in pods
                 if (p.get("status") or {}).get("phase") == "Running"]
        return sorted(names) if len(names) == replicas else None

    return await wait_for(running, timeout=60, what=f"{replicas} ReplicaSet pods Running")


async def test_failed_pods_go_unless_their_reason_or_age_keeps_them(
    kube: KubeClient, namespace: str, nodes: NodeFactory, cluster: Any
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    oom, erred = await replicaset_pods(kube, namespace, node, 2)
    for name, reason, code in ((oom, "OOMKilled", 137), (erred, "Error", 1)):
        failed = await fail_pod(kube, namespace, name, reason=reason, exit_code=code)
        assert failed["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"

    async def replaced() -> set[str] | None:
        # The ReplicaSet replaces its Failed pods; the pass must leave the replacements alone.
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
        running = {p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"}
        return running if len(running) == 2 and len(pods) == 4 else None

    replacements = await wait_for(replaced, timeout=60, what="two Running replacements")
    scope = {"namespaces": {"include": [namespace]}}
    any_age = {**scope, "minPodLifetimeSeconds": 0}

    by_reason = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemoveFailedPods", {**any_age, "reasons": ["OOMKilled"]}))

    assert by_reason.code == 0, by_reason.output
    assert await remaining(kube, namespace) == replacements | {erred}, by_reason.output
    assert await evicted_by(kube, namespace, "RemoveFailedPods", by_reason.output) == {oom}

    # The Error pod was created seconds ago: too young for upstream's default
    # minPodLifetimeSeconds of 3600 (removefailedpods SetDefaults_RemoveFailedPodsArgs).
    too_young = await run_pass(cluster.kubeconfig, v1alpha2("RemoveFailedPods", scope))

    assert too_young.code == 0, too_young.output
    assert await remaining(kube, namespace) == replacements | {erred}, too_young.output

    # Nothing else protects it: with any age allowed and no reasons it goes too.
    unrestricted = await run_pass(cluster.kubeconfig, v1alpha2("RemoveFailedPods", any_age))

    assert unrestricted.code == 0, unrestricted.output
    assert await remaining(kube, namespace) == replacements, unrestricted.output
    assert await evicted_by(kube, namespace, "RemoveFailedPods", unrestricted.output) == {
        oom, erred}


async def test_pods_at_the_restart_threshold_go_and_those_below_stay(
    kube: KubeClient, namespace: str, nodes: NodeFactory, cluster: Any
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    owner = await make_owner(kube, namespace, "owner")
    names = ["crashing", "flaky", "steady"]
    for name in names:
        await make_pod(kube, namespace, name, node, owner)
    await wait_running(kube, namespace, names)
    await restart_pod(kube, namespace, "crashing", 3)
    await restart_pod(kube, namespace, "flaky", 2)

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsHavingTooManyRestarts",
        {"podRestartThreshold": 3, "namespaces": {"include": [namespace]}}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"flaky", "steady"}, result.output
    assert await evicted_by(kube, namespace, "RemovePodsHavingTooManyRestarts",
                            result.output) == {"crashing"}


async def test_restart_states_pick_the_crash_looping_pod(
    kube: KubeClient, namespace: str, nodes: NodeFactory, cluster: Any
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    owner = await make_owner(kube, namespace, "owner")
    await make_pod(kube, namespace, "looping", node, owner)
    await make_pod(kube, namespace, "recovered", node, owner)
    await wait_running(kube, namespace, ["looping", "recovered"])
    await restart_pod(kube, namespace, "looping", 6, waiting_reason="CrashLoopBackOff")
    await restart_pod(kube, namespace, "recovered", 6)  # running again after its restarts

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsHavingTooManyRestarts",
        {"podRestartThreshold": 5, "states": ["CrashLoopBackOff"],
         "namespaces": {"include": [namespace]}}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"recovered"}, result.output
    assert await evicted_by(kube, namespace, "RemovePodsHavingTooManyRestarts",
                            result.output) == {"looping"}


async def test_pods_on_a_not_ready_node_are_left_alone(
    kube: KubeClient, namespace: str, nodes: NodeFactory, cluster: Any
) -> None:
    """As upstream, a pass only works on Ready nodes: the NotReady node's pods stay."""
    ready = (await nodes.create())["metadata"]["name"]
    sick = (await nodes.create())["metadata"]["name"]
    owner = await make_owner(kube, namespace, "owner")
    await make_pod(kube, namespace, "on-ready", ready, owner)
    await make_pod(kube, namespace, "on-sick", sick, owner)
    await wait_running(kube, namespace, ["on-ready", "on-sick"])
    await make_node_not_ready(kube, sick)

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "PodLifeTime", {"maxPodLifeTimeSeconds": 0, "namespaces": {"include": [namespace]}}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"on-sick"}, result.output
    assert await evicted_by(kube, namespace, "PodLifeTime", result.output) == {"on-ready"}
