"""LowNodeUtilization by a Prometheus query (``metricsUtilization.source: Prometheus``): the
policy fields and upstream's validation sentences, the query result's conversion, and the
unconstrained eviction a per-node figure leads to.

Upstream (kubernetes-sigs/descheduler): pkg/descheduler/policyconfig.go
validateDeschedulerConfiguration (the provider), pkg/framework/plugins/nodeutilization/
validation.go and lownodeutilization.go validatePrometheusMetricsUtilization (the plugin's
args), usageclients.go NodeUsageFromPrometheusMetrics and prometheusUsageClient (the result),
nodeutilization.go evictPods ("only a single pod eviction is allowed")."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.descheduler.policy import parse_policy
from berthmaster.scheduler.descheduler.strategies import low_node_utilization
from berthmaster.scheduler.descheduler.usage_metrics import ActualUsage
from berthmaster.scheduler.descheduler.usage_prometheus import (
    METRIC_RESOURCE,
    PrometheusProvider,
    PrometheusUnavailable,
    node_usage_from_result,
    query_url,
)
from tests.unit.descheduler.builders import make_node, make_pod, plan

QUERY = "instance:node_cpu:ratio"
PROVIDER = {"source": "Prometheus", "prometheus": {"url": "https://prometheus.monitoring:9091"}}
METRIC = {"thresholds": {METRIC_RESOURCE: 30}, "targetThresholds": {METRIC_RESOURCE: 50}}


def policy(args: dict[str, Any] | None = None, providers: Any = None,
           limits: dict[str, Any] | None = None) -> dict[str, Any]:
    plugin_args = {**METRIC, "metricsUtilization": {"source": "Prometheus",
                                                    "prometheus": {"query": QUERY}},
                   **(args or {}), **({"evictionLimits": limits} if limits else {})}
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "metricsProviders": [PROVIDER] if providers is None else providers,
            "profiles": [{"name": "usage",
                          "pluginConfig": [{"name": "LowNodeUtilization", "args": plugin_args}],
                          "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}


def problems(document: dict[str, Any]) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document)
    return "\n".join(caught.value.problems)


def test_a_prometheus_policy_is_accepted_with_its_secret() -> None:
    """pkg/api/v1alpha2/types.go: metricsProviders[].prometheus.url and
    authToken.secretReference; the plugin's metricsUtilization.prometheus.query."""
    provider = {"source": "Prometheus", "prometheus": {
        "url": "https://thanos-querier.openshift-monitoring.svc:9091",
        "authToken": {"secretReference": {"namespace": "ops", "name": "prom-token"}}}}
    parsed = parse_policy(policy(providers=[provider]))
    assert parsed.prometheus == PrometheusProvider(
        "https://thanos-querier.openshift-monitoring.svc:9091", "ops", "prom-token")
    assert parsed.prometheus_queries == (QUERY,)
    assert not parsed.uses_actual_usage and not parsed.kubernetes_metrics


@pytest.mark.parametrize(("document", "expected"), [
    (policy(providers=[{"source": "Prometheus"}]),
     "prometheus configuration is required when prometheus source is enabled"),
    (policy(providers=[{"source": "Prometheus", "prometheus": {"url": ""}}]),
     "prometheus URL is required when prometheus is enabled"),
    (policy(providers=[{"source": "Prometheus", "prometheus": {"url": "::nope"}}]),
     "error parsing prometheus URL"),
    (policy(providers=[{"source": "Prometheus", "prometheus": {
        "url": "http://p:9090", "authToken": {}}}]),
     "prometheus authToken secret is expected to be set when authToken field is"),
    (policy(providers=[{"source": "Prometheus", "prometheus": {
        "url": "http://p:9090", "authToken": {"secretReference": {"name": "t"}}}}]),
     "prometheus authToken secret reference does not set both namespace and name"),
    (policy(providers=[PROVIDER, PROVIDER]),
     "metric provider 'Prometheus' is already configured, each source can be configured "
     "only once"),
    (policy({"metricsUtilization": {"source": "Prometheus"}}),
     'prometheus query is required when metrics source is set to "Prometheus"'),
    (policy({"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}),
     'thresholds are expected to specify a single instance of "MetricResource" resource, '
     "got [cpu] instead"),
    (policy(providers=[]), "prometheus client not initialized"),
])
def test_prometheus_validation_as_upstream(document: dict[str, Any], expected: str) -> None:
    assert expected in problems(document)


def vector(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1700000000.0, value]} for labels, value in samples]}}


def test_a_vector_becomes_percentages_of_metric_resource() -> None:
    """NodeUsageFromPrometheusMetrics: the ``instance`` label names the node; value x 100,
    truncated."""
    assert node_usage_from_result(vector(({"instance": "a"}, "0.456"),
                                         ({"instance": "b"}, "1"))) == {
        "a": {METRIC_RESOURCE: 45}, "b": {METRIC_RESOURCE: 100}}


@pytest.mark.parametrize(("body", "expected"), [
    ({"status": "success", "data": {"resultType": "matrix", "result": []}},
     'expected query results to be of type "vector", got "matrix" instead'),
    (vector(({"node": "a"}, "0.5")), "the collected metrics sample is missing 'instance' key"),
    (vector(({"instance": "a"}, "1.5")),
     'the collected metrics sample for "a" has value 1.5 outside of <0; 1> interval'),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"},
     "unable to capture prometheus metrics: bad_data: parse error"),
])
def test_a_bad_result_says_why(body: dict[str, Any], expected: str) -> None:
    with pytest.raises(PrometheusUnavailable, match=expected.replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        node_usage_from_result(body)


def test_the_query_url_is_prometheus_instant_query() -> None:
    assert query_url("http://p:9090/", "up == 1") == "http://p:9090/api/v1/query?query=up+%3D%3D+1"


def usage(figures: dict[str, int]) -> dict[str, ActualUsage]:
    return {QUERY: ActualUsage(nodes={n: {METRIC_RESOURCE: v} for n, v in figures.items()},
                               per_pod=False)}


def setup() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(n) for n in ("hot", "warm", "cold")]
    pods = [make_pod(f"{n}{i}", n, cpu="10m", owner=f"{n}{i}") for n in ("hot", "warm")
            for i in range(3)]
    return nodes, pods


def test_one_pod_leaves_each_node_over_target_by_the_query() -> None:
    """The query, not requests (10m each), decides: hot (80 %) is over the 50 % target, cold
    (10 %) under 30 %; no pod's share is known, so one pod leaves hot, then nothing more."""
    nodes, pods = setup()
    params = parse_policy(policy()).strategies[0].params
    evicted, _ = plan(low_node_utilization, params, nodes, pods,
                      prometheus_usage=usage({"hot": 80, "warm": 40, "cold": 10}))
    assert len(evicted) == 1 and evicted[0].startswith("hot"), evicted


def test_the_node_limit_lets_more_pods_leave() -> None:
    nodes, pods = setup()
    params = parse_policy(policy(limits={"node": 2})).strategies[0].params
    evicted, _ = plan(low_node_utilization, params, nodes, pods,
                      prometheus_usage=usage({"hot": 80, "warm": 40, "cold": 10}))
    assert len(evicted) == 2 and all(e.startswith("hot") for e in evicted), evicted


def test_a_node_the_query_misses_fails_the_strategy() -> None:
    """prometheusUsageClient.sync: 'unable to find metric entry for <node>'."""
    nodes, pods = setup()
    params = parse_policy(policy()).strategies[0].params
    with pytest.raises(LookupError, match="unable to find metric entry for cold"):
        plan(low_node_utilization, params, nodes, pods,
             prometheus_usage=usage({"hot": 80, "warm": 40}))
