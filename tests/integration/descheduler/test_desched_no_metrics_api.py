"""A policy that balances by actual usage, on a control plane with no metrics API.

The local control plane serves no ``metrics.k8s.io`` (no ``v1beta1.metrics.k8s.io``
APIService): the pass must say so in its log and evict nothing, and the operator must say so on
the Descheduler (condition and event) and create no Job.
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.scheduler.descheduler.usage_metrics import APISERVICE_PATH
from tests.integration.descheduler.kit import busy_node_scene, remaining, run_pass, v1alpha2
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
