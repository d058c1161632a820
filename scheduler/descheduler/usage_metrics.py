"""Actual resource usage from the metrics API (``metrics.k8s.io/v1beta1``), for LowNodeUtilization.

Design: upstream (sigs.k8s.io/descheduler pkg/descheduler/metricscollector/metricscollector.go)
keeps, per node, an exponentially smoothed usage ``beta * previous + (1 - beta) * sample`` with
``beta = 0.9``, CPU in millicores and memory in bytes; the first sample is taken as is. Its
actual usage client (pkg/framework/plugins/nodeutilization/usageclients.go, actualUsageClient)
reads a node's cpu and memory from that collector, counts its pods for ``pods``, and reads each
pod's usage (the sum of its containers' PodMetrics) to subtract when the pod is evicted.

The pure half is here (:func:`weighted_average`, :func:`smooth`, :func:`container_sum`,
:class:`ActualUsage`); :func:`read_actual_usage` is the only I/O: it first asks whether the
``v1beta1.metrics.k8s.io`` APIService exists and is Available, so a cluster with no metrics API
gets :class:`MetricsUnavailable` naming what to install, and the pass evicts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.scheduler.quantities import quantity_value

BETA = 0.9
APISERVICE = "v1beta1.metrics.k8s.io"
APISERVICE_PATH = f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}"
NODE_METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"
POD_METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/pods"
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"
# The reason on the run's log line, the Descheduler condition and the event.
REASON_UNAVAILABLE = "MetricsAPIUnavailable"


class MetricsUnavailable(Exception):
    """The metrics API is not served: no APIService, or it is not Available."""


def weighted_average(previous: int, sample: int) -> int:
    """metricscollector.go weightedAverage: rounded ``beta*previous + (1-beta)*sample``."""
    return round(BETA * previous + (1 - BETA) * sample)


def smooth(previous: Mapping[str, int] | None, sample: Mapping[str, int]) -> dict[str, int]:
    """One Collect step for one node: the first sample as is, then the weighted average."""
    if previous is None:
        return dict(sample)
    return {r: weighted_average(previous.get(r, 0), v) for r, v in sample.items()}


def usage_amounts(usage: Mapping[str, Any]) -> dict[str, int]:
    """A metrics ``usage`` map as millicores of cpu and bytes of memory."""
    return {r: quantity_value(r, str(usage.get(r, "0"))) for r in ("cpu", "memory")}


def container_sum(pod_metrics: Mapping[str, Any]) -> dict[str, int]:
    """A PodMetrics object's usage: its containers' usage summed (usageclients.go podUsage)."""
    total = {"cpu": 0, "memory": 0}
    for container in pod_metrics.get("containers") or ():
        for resource, amount in usage_amounts(container.get("usage") or {}).items():
            total[resource] += amount
    return total


@dataclass
class ActualUsage:
    """Smoothed node usage and per-pod usage, keyed by node name and ``namespace/name``."""

    nodes: dict[str, dict[str, int]] = field(default_factory=dict)
    pods: dict[str, dict[str, int]] = field(default_factory=dict)
    # False for a Prometheus query's node usage (usage_prometheus): no pod's share is known,
    # so evictions are unconstrained (one pod per node unless evictionLimits.node)
    per_pod: bool = True

    def collect(self, node_metrics: Iterable[Mapping[str, Any]]) -> None:
        for item in node_metrics:
            name = (item.get("metadata") or {}).get("name", "")
            self.nodes[name] = smooth(self.nodes.get(name), usage_amounts(item.get("usage") or {}))

    def pod_usage(self, pod: Mapping[str, Any]) -> dict[str, int]:
        meta = pod.get("metadata") or {}
        return self.pods.get(f"{meta.get('namespace')}/{meta.get('name')}",
                             {"cpu": 0, "memory": 0})


def apiservice_problem(apiservice: Mapping[str, Any] | None) -> str | None:
    """Why the metrics API cannot be used, or None when its APIService is Available."""
    if apiservice is None:
        return (f"the metrics API is not served: there is no APIService {APISERVICE}; install "
                "metrics-server (or another metrics.k8s.io provider), or remove metricsCollector"
                "/metricsProviders and metricsUtilization to balance by requests")
    for condition in (apiservice.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Available" and condition.get("status") == "True":
            return None
    return (f"the metrics API is not available: APIService {APISERVICE} is not Available; "
            "check the metrics-server Deployment and its Service")


async def read_actual_usage(kube: KubeClient) -> ActualUsage:
    """Check the APIService, then read NodeMetrics and PodMetrics once."""
    problem = apiservice_problem(await kube.get_if_exists(APISERVICE_PATH))
    if problem:
        raise MetricsUnavailable(problem)
    usage = ActualUsage()
    try:
        usage.collect((await kube.get(NODE_METRICS_PATH)).get("items") or ())
        for item in (await kube.get(POD_METRICS_PATH)).get("items") or ():
            meta = item.get("metadata") or {}
            usage.pods[f"{meta.get('namespace')}/{meta.get('name')}"] = container_sum(item)
    except KubeError as error:
        raise MetricsUnavailable(f"the metrics API could not be read: {error}") from error
    return usage
