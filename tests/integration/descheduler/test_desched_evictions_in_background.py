"""Evictions in background on the real API server: ``berthmaster deschedule
--feature-gates=EvictionsInBackground=true`` leaves alone a pod whose eviction is already under
way (annotated ``request-evict-only`` and ``eviction-in-progress``, as KubeVirt marks a VMI's
launcher pod while it migrates) and counts it against ``maxNoOfPodsToEvictTotal``, as
upstream's PodEvictor does (sigs.k8s.io/descheduler pkg/descheduler/evictions/evictions.go);
without the gate the same pod is evicted like any other. The 429 "Eviction triggered
evacuation" answer is covered by tests/unit/descheduler/test_desched_background.py (it takes
an eviction webhook such as KubeVirt's to produce)."""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.scheduler.descheduler.evictor import EVICTION_IN_PROGRESS, REQUEST_EVICT_ONLY
from tests.integration.descheduler.kit import (
    make_owner,
    make_pod,
    remaining,
    run_pass,
    v1alpha2,
    wait_running,
)

GATE = "--feature-gates=EvictionsInBackground=true"


async def scene(kube: KubeClient, namespace: str, nodes: Any) -> None:
    """Three pods on a node whose taint none tolerates; "migrating" is being evacuated."""
    node = (await nodes.create(taints=[{"key": "drain", "value": "now",
                                        "effect": "NoSchedule"}]))["metadata"]["name"]
    for name in ("migrating", "a", "b"):
        await make_pod(kube, namespace, name, node, await make_owner(kube, namespace, name))
    await kube.patch(resource_path(CORE, "pods", namespace, "migrating"), {"metadata": {
        "annotations": {REQUEST_EVICT_ONLY: "", EVICTION_IN_PROGRESS: ""}}})
    await wait_running(kube, namespace, ["migrating", "a", "b"])


def policy(namespace: str) -> dict[str, Any]:
    return v1alpha2("RemovePodsViolatingNodeTaints", {"namespaces": {"include": [namespace]}},
                    maxNoOfPodsToEvictTotal=2)


async def test_an_eviction_under_way_is_left_alone_and_counted(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    await scene(kube, namespace, nodes)

    result = await run_pass(cluster.kubeconfig, policy(namespace), False, None, GATE)

    assert result.code == 0, result.output
    left = await remaining(kube, namespace)
    # the migrating pod stays and uses one of the two evictions the limit allows
    assert "migrating" in left and len(left) == 2, result.output
    assert "1 eviction(s) in background under way" in result.output
    assert "evicted 1 pod(s)" in result.output


async def test_without_the_gate_the_pod_is_evicted_like_any_other(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    await scene(kube, namespace, nodes)

    result = await run_pass(cluster.kubeconfig, policy(namespace))

    assert result.code == 0, result.output
    assert len(await remaining(kube, namespace)) == 1, result.output
    assert "evicted 2 pod(s)" in result.output


async def test_an_unknown_gate_is_refused(cluster: Any) -> None:
    result = await run_pass(cluster.kubeconfig, policy("default"), False, None,
                            "--feature-gates=Nope=true")
    assert result.code == 2
    assert "--feature-gates: unrecognized feature gate: Nope" in result.output
