"""LowNodeUtilization by a Prometheus query, against a real Prometheus and the real API server.

Prometheus (built from hack/prometheus, scraping nothing) answers the policy's instant query:
a PromQL expression that gives each of this test's nodes a utilization in [0, 1] under the
``instance`` label, the shape upstream requires (kubernetes-sigs/descheduler
pkg/framework/plugins/nodeutilization/usageclients.go NodeUsageFromPrometheusMetrics). The
bearer token comes from a Secret named by the provider's ``authToken.secretReference``, key
``prometheusAuthToken`` (pkg/descheduler/prom_client_controller.go); this Prometheus checks no
token, so the test shows the Secret is read (a missing one fails the strategy) rather than the
token's use. The pass is ``berthmaster deschedule``, the Job's command.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.tooling.devcluster import build
from tests.integration.descheduler.kit import (
    make_owner,
    make_pod,
    remaining,
    run_pass,
    v1alpha2,
    wait_running,
)
from tests.support.prometheus import configuration, running

SECRET = "prometheus-token"


def utilization(figures: dict[str, float]) -> str:
    """An expression whose vector holds one sample per node: ``instance`` = node, the value."""
    return " or ".join(f'label_replace(vector({value}), "instance", "{node}", "", "")'
                       for node, value in figures.items())


def policy(url: str, query: str, namespace: str, selector: str) -> dict[str, Any]:
    return v1alpha2("LowNodeUtilization", {
        "thresholds": {"MetricResource": 30}, "targetThresholds": {"MetricResource": 50},
        "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": query}}},
        point="balance", nodeSelector=selector, metricsProviders=[{
            "source": "Prometheus", "prometheus": {
                "url": url,
                "authToken": {"secretReference": {"namespace": namespace, "name": SECRET}}}}])


@pytest.fixture
async def prometheus(tmp_path: Path) -> Any:
    binary = build.build_prometheus(say=lambda line: print(line, flush=True))["prometheus"]
    async with running(binary, configuration([], []), tmp_path / "prometheus") as api:
        yield api


async def scene(kube: KubeClient, namespace: str, nodes: Any
                ) -> tuple[str, list[str], list[str], str]:
    """Three 10-cpu nodes of their own label; eight owned pods requesting 10m on the first."""
    selector = f"berthmaster.io/prometheus-test={uuid.uuid4().hex[:8]}"
    key, value = selector.split("=")
    capacity = {"cpu": "10", "memory": "32Gi", "pods": "100"}
    made = [(await nodes.create(capacity=capacity, labels={key: value}))["metadata"]["name"]
            for _ in range(3)]
    names = [f"p{i}" for i in range(8)]
    for i, name in enumerate(names):
        await make_pod(kube, namespace, name, made[0],
                       await make_owner(kube, namespace, f"owner-{i}"), cpu="10m")
    await wait_running(kube, namespace, names)
    return made[0], made[1:], names, selector


async def test_pass_evicts_by_a_prometheus_query_not_requests(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any, prometheus: Any
) -> None:
    """By requests the first node is under 1 %; the query says 90 % against 5 % and 10 % for
    the others: the node is over the 50 % target, and, no pod's share being known, one pod
    leaves it (nodeutilization.go evictPods: "only a single pod eviction is allowed")."""
    hot, idle, names, selector = await scene(kube, namespace, nodes)
    await kube.create(resource_path(CORE, "secrets", namespace), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET},
        "data": {"prometheusAuthToken": base64.b64encode(b"not-checked").decode()}})
    query = utilization({hot: 0.9, idle[0]: 0.05, idle[1]: 0.1})
    assert len(await prometheus.query(query)) == 3  # the premise: Prometheus answers it

    by_requests = v1alpha2("LowNodeUtilization", {
        "thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}},
        point="balance", nodeSelector=selector)
    result = await run_pass(cluster.kubeconfig, by_requests)
    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == set(names), result.output

    result = await run_pass(cluster.kubeconfig, policy(prometheus.base, query, namespace,
                                                       selector))

    assert result.code == 0, result.output
    assert len(await remaining(kube, namespace)) == 7, result.output
    assert "total: evicted 1 pod(s)" in result.output
    assert f"node {hot} over target (MetricResource 90%)" in result.output


async def test_a_missing_token_secret_fails_the_strategy_and_evicts_nothing(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any, prometheus: Any
) -> None:
    hot, idle, names, selector = await scene(kube, namespace, nodes)
    query = utilization({hot: 0.9, idle[0]: 0.05, idle[1]: 0.1})

    result = await run_pass(cluster.kubeconfig, policy(prometheus.base, query, namespace,
                                                       selector))

    assert result.code == 1, result.output
    assert f"unable to get {namespace}/{SECRET} secret: not found" in result.output
    assert await remaining(kube, namespace) == set(names)
