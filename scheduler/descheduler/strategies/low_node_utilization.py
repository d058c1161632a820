"""LowNodeUtilization: move pods off over-utilized nodes while under-utilized nodes exist.

A node is under-utilized when its usage of every thresholded resource is at or below ``thresholds``,
over-utilized when any usage is above ``targetThresholds`` (upstream's ``nodeutilization``
classifier, kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization; usage is by requests,
as a percentage of allocatable). Unschedulable nodes never count as under-utilized. Nothing moves
when no node is under-utilized, when their number is not above ``numberOfNodes``, when every node is
under-utilized, or when none is over.

Evictions go from the most used over-utilized node down, each node's pods in eviction order,
while the node is still above target and the under-utilized nodes still have room (the sum of
their headroom up to ``targetThresholds``) for what is being moved.

Args (v1alpha2): ``thresholds``, ``targetThresholds``, ``numberOfNodes``,
``useDeviationThresholds``, ``evictableNamespaces`` (exclude only), ``evictionLimits.node``
(at most that many pods leave each over-utilized node per run). v1alpha1:
``params.nodeResourceUtilizationThresholds`` plus ``namespaces``.

Resources a threshold map leaves out: v1alpha1 policies get v0.30.1's fill-in
(lownodeutilization.go Balance): cpu, memory and pods at 100 % (0 % with deviation
thresholds), and in deviation mode a resource whose ``thresholds`` value is 0 is measured
against the whole allocatable, i.e. never decides (getNodeThresholds). v1alpha2 follows
upstream's main, which classifies by the given resources only and derives deviation bounds
from the average even for 0. Either way cpu, memory and pods bound the room (utilization.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import CandidateStream, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    boolean,
    check_known,
    integer,
    join,
    mapping,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.utilization import (
    BASIC,
    MAX_PERCENTAGE,
    MIN_PERCENTAGE,
    NodeUsage,
    average_percent,
    evict_into_room,
    evictable_filter,
    from_v1alpha1_thresholds,
    node_usage,
    number_of_nodes,
    raw_total,
    room_on,
    thresholds,
    too_few_underutilized,
    tracked,
)
from berthmaster.scheduler.descheduler.usage_metrics import KUBERNETES_METRICS, PROMETHEUS
from berthmaster.scheduler.descheduler.usage_prometheus import METRIC_RESOURCE

NAME = "LowNodeUtilization"
EXTENSION_POINT = "balance"
ARGS = ("thresholds", "targetThresholds", "numberOfNodes", "useDeviationThresholds",
        "evictableNamespaces", "evictionLimits", "metricsUtilization")
V1ALPHA1_KEYS = ("thresholds", "targetThresholds", "numberOfNodes", "useDeviationThresholds")


@dataclass(frozen=True)
class Params:
    thresholds: Mapping[str, float]
    target_thresholds: Mapping[str, float]
    number_of_nodes: int = 0
    use_deviation_thresholds: bool = False
    filter: PodFilter = EVERY_POD
    node_eviction_limit: int | None = None
    v1alpha1: bool = False  # v0.30.1's fill-in of cpu/memory/pods (module docstring)
    # KubernetesMetrics: usage from the metrics API (usage_metrics); Prometheus: node usage
    # from ``prometheus_query`` (usage_prometheus); None: requests
    metrics_utilization: str | None = None
    prometheus_query: str | None = None


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    return from_v1alpha1_thresholds(params, where, problems, V1ALPHA1_KEYS)


def v1alpha1_params(params: Params) -> Params:
    return replace(params, v1alpha1=True)


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    low = thresholds(args.get("thresholds"), join(where, "thresholds"), problems, "thresholds")
    high = thresholds(args.get("targetThresholds"), join(where, "targetThresholds"), problems,
                      "targetThresholds")
    deviation = boolean(args.get("useDeviationThresholds"), join(where, "useDeviationThresholds"),
                        problems)
    if low and high:
        if set(low) != set(high):
            problems.add(where, "thresholds and targetThresholds configured different resources; "
                                "give both the same resources")
        elif not deviation:
            for resource, value in low.items():
                if value > high[resource]:
                    problems.add(where, f"thresholds' {resource} percentage is greater than "
                                        "targetThresholds'")
    limits_where = join(where, "evictionLimits")
    limits = mapping(args.get("evictionLimits"), limits_where, problems)
    check_known(limits, ("node",), limits_where, problems)
    node_limit = integer(limits.get("node"), join(limits_where, "node"), problems, minimum=0)
    source, query = metrics_utilization(args, where, problems)
    if source == PROMETHEUS:
        prometheus_thresholds(low, high, where, problems)
    return Params(low, high, number_of_nodes(args, where, problems), deviation,
                  evictable_filter(args, where, problems), node_limit,
                  metrics_utilization=source, prometheus_query=query)


def uses_actual_usage(params: Any) -> bool:
    """The policy's cross-check: this strategy's params ask for the metrics API."""
    return isinstance(params, Params) and params.metrics_utilization == KUBERNETES_METRICS


def prometheus_query(params: Any) -> str | None:
    """The policy's cross-check: the Prometheus query these params run, if any."""
    return params.prometheus_query if isinstance(params, Params) else None


def prometheus_thresholds(low: Mapping[str, float], high: Mapping[str, float], where: str,
                          problems: Problems) -> None:
    """lownodeutilization.go validatePrometheusMetricsUtilization: a Prometheus query gives
    one figure per node, so both maps threshold ``MetricResource`` alone."""
    for label, given in (("thresholds", low), ("targetThresholds", high)):
        if given and list(given) != [METRIC_RESOURCE]:
            problems.add(join(where, label), f"{label} are expected to specify a single "
                                             f'instance of "{METRIC_RESOURCE}" resource, got '
                                             f"[{' '.join(sorted(given))}] instead")


def metrics_utilization(args: Mapping[str, Any], where: str,
                        problems: Problems) -> tuple[str | None, str | None]:
    """``metricsUtilization`` as upstream's ValidateLowNodeUtilizationArgs checks it
    (pkg/framework/plugins/nodeutilization/validation.go): the source, and the query with
    Prometheus; the deprecated ``metricsServer: true`` means KubernetesMetrics. (None, None)
    when utilization is by requests."""
    at = join(where, "metricsUtilization")
    raw = mapping(args.get("metricsUtilization"), at, problems)
    if args.get("metricsUtilization") is None:
        return None, None
    check_known(raw, ("metricsServer", "source", "prometheus"), at, problems)
    server = boolean(raw.get("metricsServer"), join(at, "metricsServer"), problems)
    source = str(raw.get("source") or "")
    if source == KUBERNETES_METRICS and server:
        problems.add(at, f'it is not allowed to set both "{KUBERNETES_METRICS}" source and '
                         "metricsServer")
    if source == KUBERNETES_METRICS and raw.get("prometheus") is not None:
        problems.add(at, "prometheus configuration is not allowed to set when source is set to "
                         f'"{KUBERNETES_METRICS}"')
    if source == PROMETHEUS:
        prometheus = mapping(raw.get("prometheus"), join(at, "prometheus"), problems)
        check_known(prometheus, ("query",), join(at, "prometheus"), problems)
        query = prometheus.get("query")
        if not isinstance(query, str) or not query.strip():
            problems.add(join(join(at, "prometheus"), "query"), "prometheus query is required when "
                         f'metrics source is set to "{PROMETHEUS}"')
            return None, None
        return PROMETHEUS, query
    if source and source != KUBERNETES_METRICS:
        problems.add(join(at, "source"), "unrecognized metrics source")
        return None, None
    if not source and not server:
        problems.add(at, "metrics source is empty; set source: KubernetesMetrics")
        return None, None
    return KUBERNETES_METRICS, None


def filled(params: Params) -> tuple[dict[str, float], dict[str, float]]:
    """The threshold maps the classification uses (v0.30.1's fill-in for v1alpha1)."""
    low, high = dict(params.thresholds), dict(params.target_thresholds)
    if params.v1alpha1:
        fill = MIN_PERCENTAGE if params.use_deviation_thresholds else MAX_PERCENTAGE
        for resource in BASIC:
            if resource not in low:
                low[resource] = high[resource] = fill
    return low, high


def bounds(params: Params, usages: list[NodeUsage]) -> tuple[dict[str, float], dict[str, float]]:
    """The low and high percentages, absolute or around the average (deviation mode)."""
    low, high = filled(params)
    if not params.use_deviation_thresholds:
        return low, high
    average = average_percent(usages, list(low))
    lower = {r: max(MIN_PERCENTAGE, average[r] - low[r]) for r in low}
    upper = {r: min(MAX_PERCENTAGE, average[r] + high[r]) for r in low}
    if params.v1alpha1:  # v0.30.1 getNodeThresholds: a 0 low threshold means the capacity
        for resource in low:
            if low[resource] == MIN_PERCENTAGE:
                lower[resource] = upper[resource] = MAX_PERCENTAGE
    return lower, upper


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    resources = list(filled(params)[0])
    every = tracked(resources)
    if params.metrics_utilization == PROMETHEUS:
        # lownodeutilization.go: with Prometheus only the thresholded MetricResource is tracked
        every = resources
        query = params.prometheus_query or ""
        actual = ctx.state.prometheus_usage.get(query)
        if actual is None:
            raise LookupError(ctx.state.prometheus_errors.get(
                query, "prometheus client not initialized"))
    else:
        actual = ctx.state.actual_usage if params.metrics_utilization else None
        if params.metrics_utilization and actual is None:
            raise LookupError("metrics client not initialized")
    usages = [node_usage(n, ctx.consider(ctx.pods_on(n["metadata"]["name"])), every, ctx, actual)
              for n in ctx.nodes]
    low_bound, high_bound = bounds(params, usages)
    under = [u for u in usages if not u.view.unschedulable
             and all(u.percent(r) <= low_bound[r] for r in resources)]
    over = [u for u in usages if any(u.percent(r) > high_bound[r] for r in resources)]
    if not under:
        ctx.tally.note = "no node is underutilized, nothing to do here"
        return
    if too_few_underutilized(ctx, len(under), len(usages), params.number_of_nodes):
        return
    if not over:
        ctx.tally.note = "all nodes are under target utilization, nothing to do here"
        return
    # Room left on the under-utilized nodes, up to the target, in absolute amounts.
    room = room_on(under, high_bound, every)
    over.sort(key=raw_total, reverse=True)
    for usage in over:
        pods = sorted((p for p in usage.pods if params.filter.admits(p)), key=eviction_order)

        def on_target(usage: NodeUsage = usage) -> bool:
            return not any(usage.percent(r) > high_bound[r] for r in resources)

        if (yield from evict_into_room(ctx, usage, pods, room, resources, "over target",
                                       done=on_target, receivers=under,
                                       node_limit=params.node_eviction_limit)):
            return
