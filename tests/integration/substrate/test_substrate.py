"""The local control plane is real: nodes, binding, controllers, evictions, deletions, Jobs."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from tests.integration.conftest import NodeFactory
from tests.support.waiting import wait_for

APPS = group_path("apps", "v1")
POLICY = group_path("policy", "v1")
BATCH = group_path("batch", "v1")


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


async def phase(kube: KubeClient, namespace: str, name: str) -> str:
    found = await kube.get(resource_path(CORE, "pods", namespace, name))
    return str(found.get("status", {}).get("phase", ""))


async def test_fake_node_becomes_ready(kube: KubeClient, nodes: NodeFactory) -> None:
    node = await nodes.create(labels={"disktype": "ssd"}, zone="zone-a",
                              capacity={"cpu": "8", "example.com/gpu": "2"})
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
    assert node["status"]["allocatable"]["example.com/gpu"] == "2"


async def test_binding_makes_a_pod_running(kube: KubeClient, namespace: str,
                                           nodes: NodeFactory) -> None:
    node = await nodes.create()
    await kube.create(resource_path(CORE, "pods", namespace), pod("bound"))
    await kube.create(resource_path(CORE, "pods", namespace, "bound", "binding"), {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"]},
    })
    await wait_for(lambda: _is(phase(kube, namespace, "bound"), "Running"), timeout=60,
                   what="pod bound Running")
    # A second binding of the same pod is refused: the API server never double-binds.
    with pytest.raises(KubeError) as refused:
        await kube.create(resource_path(CORE, "pods", namespace, "bound", "binding"), {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"]},
        })
    assert refused.value.status == 409


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def test_deployment_pods_are_created_by_the_controller_manager(
    kube: KubeClient, namespace: str
) -> None:
    await kube.create(resource_path(APPS, "deployments", namespace), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": pod("x")["spec"]}},
    })

    async def three_pods() -> bool:
        listed = await kube.get(resource_path(CORE, "pods", namespace), labelSelector="app=web")
        return len(listed["items"]) == 3

    await wait_for(three_pods, timeout=60, what="3 pods of deployment web")


async def test_eviction_respects_pod_disruption_budget(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    for name in ("a-0", "a-1"):
        await kube.create(resource_path(CORE, "pods", namespace), pod(name, {"app": "a"}, node))
    for name in ("a-0", "a-1"):
        await wait_for(lambda n=name: _is(phase(kube, namespace, n), "Running"), timeout=60,
                       what=f"pod {name} Running")
    await kube.create(resource_path(POLICY, "poddisruptionbudgets", namespace), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "a"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
    })

    async def budget_allows_one() -> bool:
        pdb = await kube.get(resource_path(POLICY, "poddisruptionbudgets", namespace, "a"))
        status = pdb.get("status", {})
        return bool(status.get("observedGeneration") == pdb["metadata"]["generation"]
                    and status.get("disruptionsAllowed") == 1)

    await wait_for(budget_allows_one, timeout=60, what="PDB a to allow one disruption")

    def eviction(name: str) -> dict[str, Any]:
        return {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}

    await kube.create(resource_path(CORE, "pods", namespace, "a-0", "eviction"), eviction("a-0"))
    with pytest.raises(KubeError) as refused:
        await kube.create(resource_path(CORE, "pods", namespace, "a-1", "eviction"),
                          eviction("a-1"))
    assert refused.value.status == 429
    assert "disruption budget" in refused.value.message


async def test_deleting_a_bound_pod_completes(kube: KubeClient, namespace: str,
                                              nodes: NodeFactory) -> None:
    node = (await nodes.create())["metadata"]["name"]
    await kube.create(resource_path(CORE, "pods", namespace), pod("doomed", node=node))
    await wait_for(lambda: _is(phase(kube, namespace, "doomed"), "Running"), timeout=60,
                   what="pod doomed Running")
    await kube.delete(resource_path(CORE, "pods", namespace, "doomed"))

    async def gone() -> bool:
        try:
            await kube.get(resource_path(CORE, "pods", namespace, "doomed"))
        except KubeError as error:
            return error.not_found
        return False

    await wait_for(gone, timeout=60, what="pod doomed deleted")


async def test_a_jobs_pod_completes(kube: KubeClient, namespace: str, nodes: NodeFactory) -> None:
    node = (await nodes.create())["metadata"]["name"]
    template = pod("job", node=node)["spec"] | {"restartPolicy": "Never"}
    await kube.create(resource_path(BATCH, "jobs", namespace), {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"backoffLimit": 0, "template": {"spec": template}},
    })

    async def succeeded() -> bool:
        job = await kube.get(resource_path(BATCH, "jobs", namespace, "once"))
        return bool(job.get("status", {}).get("succeeded") == 1)

    await wait_for(succeeded, timeout=90, what="job once to succeed")
