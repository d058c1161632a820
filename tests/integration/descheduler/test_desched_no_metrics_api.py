"""A policy that balances by actual usage, on a control plane with and without a metrics API.

The local control plane serves no ``metrics.k8s.io`` (no ``v1beta1.metrics.k8s.io``
APIService): the pass must say so in its log and evict nothing, and the operator must say so on
the Descheduler (condition and event) and create no Job. The last test then serves the group
from the same API server (CustomResourceDefinitions named as metrics-server's NodeMetrics and
PodMetrics, which make the API server register the APIService itself, Available) with usage
that disagrees with requests, and the pass evicts by usage. metrics-server itself is not run here:
it is an aggregated API server, and the local kube-apiserver has no aggregation layer (front-proxy)
configured.
"""

from __future__ import annotations

from typing import Any

import yaml

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.scheduler.descheduler.usage_metrics import APISERVICE_PATH
from tests.integration.descheduler.kit import (
    busy_node_scene,
    make_owner,
    make_pod,
    remaining,
    run_pass,
    v1alpha2,
    wait_running,
)
from tests.integration.descheduler.test_desched_operator import (  # noqa: F401 (fixtures)
    BATCH,
    DESCHEDULERS,
    condition,
    crd,
    get,
    run_operator,
)
from tests.support.waiting import wait_for


def usage_policy() -> dict[str, Any]:
    """LowNodeUtilization by actual usage, as kubernetes-sigs/descheduler's README writes it
    (pkg/api/v1alpha2/types.go MetricsProviders; nodeutilization/types.go MetricsUtilization)."""
    return v1alpha2("LowNodeUtilization", {
        "thresholds": {"cpu": 20, "memory": 20, "pods": 20},
        "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50},
        "metricsUtilization": {"source": "KubernetesMetrics"}}, point="balance",
        metricsProviders=[{"source": "KubernetesMetrics"}])


async def test_pass_without_metrics_api_says_so_and_evicts_nothing(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    """By requests this scene evicts (test_desched_pass.py's seed sample); by actual usage it
    cannot be judged without metrics.k8s.io (pkg/descheduler/descheduler.go starts the metrics
    collector only with a metrics client; usageclients.go actualUsageClient reads it)."""
    assert await kube.get_if_exists(APISERVICE_PATH) is None  # the premise
    _hot, names = await busy_node_scene(kube, namespace, nodes, idle=1)

    result = await run_pass(cluster.kubeconfig, usage_policy())

    assert result.code == 3, result.output
    assert ("MetricsAPIUnavailable: the metrics API is not served: there is no APIService "
            "v1beta1.metrics.k8s.io") in result.output
    assert "nothing was evicted" in result.output
    assert await remaining(kube, namespace) == set(names)


async def test_operator_reports_missing_metrics_api_and_creates_no_job(
    kube: KubeClient, namespace: str, operator: None
) -> None:
    name = f"usage-{namespace}"
    path = f"{DESCHEDULERS}/{name}"
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name}, "spec": {"policy": usage_policy()}})
    try:
        async def unavailable() -> dict[str, Any] | None:
            found = condition(await get(kube, path), "MetricsAvailable")
            return found if found and found["status"] == "False" else None

        found = await wait_for(unavailable, timeout=60, what="MetricsAvailable=False")
        assert found["reason"] == "MetricsAPIUnavailable"
        assert "no APIService v1beta1.metrics.k8s.io" in found["message"]
        assert "install metrics-server" in found["message"]
        ready = condition(await get(kube, path), "Ready")
        assert ready is not None and ready["status"] == "False"
        assert ready["reason"] == "MetricsAPIUnavailable"
        jobs, _ = await kube.list_all(resource_path(BATCH, "jobs", namespace))
        assert jobs == []
        events, _ = await kube.list_all(resource_path(CORE, "events", None),
                                        fieldSelector=f"involvedObject.name={name}")
        assert any(e.get("reason") == "MetricsAPIUnavailable" and e.get("type") == "Warning"
                   for e in events)
    finally:
        await kube.delete(path)


CRDS = group_path("apiextensions.k8s.io", "v1") + "/customresourcedefinitions"


def metrics_crd(plural: str, kind: str, scope: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.metrics.k8s.io", "annotations": {
                "api-approved.kubernetes.io": "unapproved, test only"}},
            "spec": {"group": "metrics.k8s.io", "scope": scope,
                     "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": "v1beta1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def test_pass_evicts_by_measured_usage_not_requests(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    """Eight pods requesting 10m each (under 1% by requests) measured at 1 cpu each (80% of the
    node): by usage the node is over the 50% target and three pods go, each taking its measured
    1 cpu off (usageclients.go actualUsageClient; lownodeutilization.go); the same policy by
    requests evicts nothing."""
    crds = [metrics_crd("nodes", "NodeMetrics", "Cluster"),
            metrics_crd("pods", "PodMetrics", "Namespaced")]
    for crd_body in crds:
        await kube.create(CRDS, crd_body)
    metrics_api = group_path("metrics.k8s.io", "v1beta1")
    try:
        async def served() -> bool:
            found = await kube.get_if_exists(APISERVICE_PATH)
            return any(c.get("type") == "Available" and c.get("status") == "True"
                       for c in ((found or {}).get("status") or {}).get("conditions") or ())

        await wait_for(served, timeout=60, what="APIService v1beta1.metrics.k8s.io Available")
        capacity = {"cpu": "10", "memory": "32Gi", "pods": "100"}
        hot = (await nodes.create(capacity=capacity))["metadata"]["name"]
        idle = [(await nodes.create(capacity=capacity))["metadata"]["name"] for _ in range(2)]
        names = [f"p{i}" for i in range(8)]
        for i, name in enumerate(names):
            owner = await make_owner(kube, namespace, f"owner-{i}")
            await make_pod(kube, namespace, name, hot, owner, cpu="10m")
            await kube.create(resource_path(metrics_api, "pods", namespace), {
                "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                "metadata": {"name": name}, "containers": [
                    {"name": "main", "usage": {"cpu": "1", "memory": "10Mi"}}]})
        await wait_running(kube, namespace, names)
        for node, cpu in [(hot, "8"), *((n, "100m") for n in idle)]:
            await kube.create(resource_path(metrics_api, "nodes"), {
                "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
                "metadata": {"name": node}, "usage": {"cpu": cpu, "memory": "1Gi"}})

        by_requests = usage_policy()
        low = by_requests["profiles"][0]["pluginConfig"][0]["args"]
        del low["metricsUtilization"]
        result = await run_pass(cluster.kubeconfig, yaml.safe_dump(by_requests))
        assert result.code == 0, result.output
        assert await remaining(kube, namespace) == set(names), result.output

        result = await run_pass(cluster.kubeconfig, usage_policy())

        assert result.code == 0, result.output
        assert len(await remaining(kube, namespace)) == 5, result.output
        assert "total: evicted 3 pod(s)" in result.output
        assert f"node {hot} over target (cpu 80%" in result.output
    finally:
        for crd_body in crds:
            await kube.delete(f"{CRDS}/{crd_body['metadata']['name']}")
