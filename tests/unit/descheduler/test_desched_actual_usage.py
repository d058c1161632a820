"""LowNodeUtilization by actual usage (metrics.k8s.io) rather than requests: the policy fields,
their validation, the collector's smoothing and the classification by measured usage."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.policy import parse_policy
from berthmaster.scheduler.descheduler.strategies import low_node_utilization
from berthmaster.scheduler.descheduler.usage_metrics import (
    ActualUsage,
    apiservice_problem,
    container_sum,
    smooth,
    weighted_average,
)
from tests.unit.descheduler.builders import make_node, make_pod, plan

LOW = {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
       "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}


def policy(metrics_utilization: Any = None, **top: Any) -> dict[str, Any]:
    args = dict(LOW)
    if metrics_utilization is not None:
        args["metricsUtilization"] = metrics_utilization
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **top,
            "profiles": [{"name": "usage",
                          "pluginConfig": [{"name": "LowNodeUtilization", "args": args}],
                          "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}


def problems(document: dict[str, Any]) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document)
    return "\n".join(caught.value.problems)


@pytest.mark.parametrize("top", [
    {"metricsCollector": {"enabled": True}},
    {"metricsProviders": [{"source": "KubernetesMetrics"}]},
])
@pytest.mark.parametrize("utilization", [{"metricsServer": True},
                                         {"source": "KubernetesMetrics"}])
def test_upstream_metrics_policies_are_accepted(top: dict[str, Any],
                                                utilization: dict[str, Any]) -> None:
    """Field names of kubernetes-sigs/descheduler pkg/api/v1alpha2/types.go (metricsCollector,
    metricsProviders) and pkg/framework/plugins/nodeutilization/types.go (metricsUtilization:
    the deprecated metricsServer, or source)."""
    parsed = parse_policy(policy(utilization, **top))
    assert parsed.kubernetes_metrics and parsed.uses_actual_usage
    assert parsed.strategies[0].params.metrics_utilization == "KubernetesMetrics"


def test_requests_policy_does_not_need_metrics() -> None:
    parsed = parse_policy(policy())
    assert not parsed.uses_actual_usage and not parsed.kubernetes_metrics


@pytest.mark.parametrize(("document", "expected"), [
    # lownodeutilization.go usageClientForMetrics: no collector -> "metrics client not initialized"
    (policy({"source": "KubernetesMetrics"}), "metrics client not initialized"),
    # nodeutilization/validation.go ValidateLowNodeUtilizationArgs
    (policy({"source": "KubernetesMetrics", "metricsServer": True},
            metricsCollector={"enabled": True}),
     'it is not allowed to set both "KubernetesMetrics" source and metricsServer'),
    (policy({"source": "KubernetesMetrics", "prometheus": {"query": "q"}},
            metricsCollector={"enabled": True}),
     'prometheus configuration is not allowed to set when source is set to "KubernetesMetrics"'),
    # pkg/descheduler/policyconfig.go validateDeschedulerConfiguration
    (policy({"source": "KubernetesMetrics"}, metricsCollector={"enabled": True},
            metricsProviders=[{"source": "KubernetesMetrics"}]),
     "it is not allowed to combine metrics provider when metrics collector is enabled"),
    (policy({"source": "KubernetesMetrics"}, metricsProviders=[
        {"source": "KubernetesMetrics"}, {"source": "KubernetesMetrics"}]),
     "metric provider 'KubernetesMetrics' is already configured, each source can be configured "
     "only once"),
])
def test_metrics_validation_as_upstream(document: dict[str, Any], expected: str) -> None:
    assert expected in problems(document)


def test_weighted_average_is_the_collectors() -> None:
    """pkg/descheduler/metricscollector/metricscollector.go: beta 0.9, rounded; the first sample
    is taken as is, later ones smoothed."""
    assert weighted_average(1000, 2000) == 1100
    assert smooth(None, {"cpu": 500, "memory": 10}) == {"cpu": 500, "memory": 10}
    assert smooth({"cpu": 500, "memory": 10}, {"cpu": 1500, "memory": 10}) == {
        "cpu": 600, "memory": 10}


def test_pod_usage_sums_containers_in_millicores_and_bytes() -> None:
    """usageclients.go actualUsageClient.podUsage: the containers' usage summed."""
    assert container_sum({"containers": [
        {"name": "a", "usage": {"cpu": "250m", "memory": "1Mi"}},
        {"name": "b", "usage": {"cpu": "1", "memory": "1Ki"}}]}) == {
        "cpu": 1250, "memory": 1024 * 1024 + 1024}


def test_apiservice_problem_names_what_to_install() -> None:
    assert "install metrics-server" in (apiservice_problem(None) or "")
    down = {"status": {"conditions": [{"type": "Available", "status": "False"}]}}
    assert "is not Available" in (apiservice_problem(down) or "")
    up = {"status": {"conditions": [{"type": "Available", "status": "True"}]}}
    assert apiservice_problem(up) is None


def measured(nodes: dict[str, int], pods: dict[str, int]) -> ActualUsage:
    usage = ActualUsage()
    usage.collect({"metadata": {"name": name}, "usage": {"cpu": f"{cpu}m", "memory": "0"}}
                  for name, cpu in nodes.items())
    usage.pods = {f"default/{name}": {"cpu": cpu, "memory": 0} for name, cpu in pods.items()}
    return usage


def test_usage_not_requests_decides_which_node_is_over() -> None:
    """lownodeutilization.go with the actualUsageClient (usageclients.go): node cpu is the
    collector's, so a node whose pods request little but burn a lot is the one evicted from;
    each eviction takes the pod's measured usage off the node."""
    nodes = [make_node(n, cpu="10", memory="32Gi", pods="100") for n in ("busy", "idle", "req")]
    busy = [make_pod(f"b{i}", "busy", cpu="10m", owner=f"o{i}") for i in range(4)]
    req = [make_pod(f"r{i}", "req", cpu="2", owner=f"q{i}") for i in range(4)]  # 80% requested
    found = Problems()
    args = low_node_utilization.parse(
        {**LOW, "metricsUtilization": {"source": "KubernetesMetrics"}}, "args", found)
    assert not found
    usage = measured({"busy": 8000, "idle": 100, "req": 1000},
                     {f"b{i}": 2000 for i in range(4)} | {f"r{i}": 250 for i in range(4)})
    evicted, _ = plan(low_node_utilization, args, nodes, busy + req, actual_usage=usage)
    # busy: 80% measured -> two pods (2000m each) bring it to 40%, under the 50% target
    # (by requests, "req" at 80% would have been the one over target)
    assert len(evicted) == 2 and all(name.startswith("b") for name in evicted), evicted


def test_a_node_missing_from_the_metrics_fails_the_strategy() -> None:
    """usageclients.go actualUsageClient.sync: 'unable to find node %q in the collected
    metrics'."""
    nodes = [make_node("a"), make_node("b")]
    params = parse_policy(policy({"source": "KubernetesMetrics"},
                                 metricsCollector={"enabled": True})).strategies[0].params
    with pytest.raises(LookupError, match="unable to find node 'b' in the collected metrics"):
        plan(low_node_utilization, params, nodes, [], actual_usage=measured({"a": 1}, {}))
