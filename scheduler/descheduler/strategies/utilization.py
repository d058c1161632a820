"""Node utilization by requests, shared by LowNodeUtilization and HighNodeUtilization.

Design: a node's usage of a resource is the sum of its non-terminal pods' requests (the
placement model's ``pod_requests``: CPU in millicores, everything else in units; ``pods``
counts pods), as a percentage of the node's allocatable. Thresholds are percentages in
[0, 100]; with ``useDeviationThresholds`` they are offsets from the average usage. The
eviction loops keep usage up to date as pods leave, so a node stops giving once it is back
within bounds and the receiving side stops taking once its spare capacity is used up.

As upstream (nodeutilization.go evictPodsFromSourceNodes), cpu, memory and pods are always
tracked (:data:`BASIC`), thresholded or not: the receiving nodes' room for them is their spare
allocatable, and moving stops once any tracked room is used up. A pod is offered only when it
tolerates every taint of at least one receiving node (utils.PodToleratesTaints, with its
"at least as many tolerations as taints" shortcut). Source nodes are visited by their summed
raw usage (cpu millicores + memory bytes + pods + the rest), upstream's sortNodesByUsage.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import Candidate, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    PodFilter,
    check_known,
    integer,
    join,
    mapping,
    namespaces,
    number,
)
from berthmaster.scheduler.descheduler.usage_metrics import ActualUsage
from berthmaster.scheduler.descheduler.usage_prometheus import METRIC_RESOURCE
from berthmaster.scheduler.model import PODS, NodeView, PodView, tolerates_all

MIN_PERCENTAGE, MAX_PERCENTAGE = 0.0, 100.0
BASIC = ("cpu", "memory", PODS)


def tracked(resources: Iterable[str]) -> list[str]:
    """The thresholded resources plus cpu, memory and pods."""
    names = list(resources)
    return names + [r for r in BASIC if r not in names]


def tolerated_somewhere(view: PodView, receivers: list[NodeUsage]) -> bool:
    """Upstream's utils.PodToleratesTaints over the receiving nodes' taints (every effect)."""
    for node in receivers:
        taints = node.view.taints
        if len(view.tolerations) >= len(taints) and tolerates_all(view.tolerations,
                                                                    taints) is None:
            return True
    return False


def room_on(receivers: list[NodeUsage], high: Mapping[str, float],
            resources: list[str]) -> dict[str, float]:
    """Spare amounts on the receiving nodes up to ``high`` percent (100 when not given)."""
    return {r: sum(max(0.0, high.get(r, MAX_PERCENTAGE) / 100.0 * u.allocatable[r] - u.used[r])
                   for u in receivers) for r in resources}


def raw_total(usage: NodeUsage) -> float:
    """sortNodesByUsage's key: the node's usage amounts summed as raw numbers."""
    return sum(usage.used.values())


def from_v1alpha1_thresholds(params: Mapping[str, Any], where: str, problems: Problems,
                             keys: Iterable[str]) -> dict[str, Any]:
    """v1alpha1's ``nodeResourceUtilizationThresholds`` (of which ``keys`` are known) and
    ``namespaces`` as the v1alpha2 args of Low/HighNodeUtilization."""
    at = join(where, "nodeResourceUtilizationThresholds")
    raw = mapping(params.get("nodeResourceUtilizationThresholds"), at, problems)
    check_known(raw, tuple(keys), at, problems)
    args = dict(raw)
    if params.get("namespaces") is not None:
        args["evictableNamespaces"] = params["namespaces"]
    return args


def number_of_nodes(args: Mapping[str, Any], where: str, problems: Problems) -> int:
    return integer(args.get("numberOfNodes"), join(where, "numberOfNodes"), problems,
                   default=0, minimum=0) or 0


def evictable_filter(args: Mapping[str, Any], where: str, problems: Problems) -> PodFilter:
    """``evictableNamespaces`` (exclude only, as upstream) as a pod filter."""
    excluded = None
    if args.get("evictableNamespaces") is not None:
        excluded = namespaces(args["evictableNamespaces"], join(where, "evictableNamespaces"),
                              problems, exclude_only=True)
    return PodFilter(excluded)


def too_few_underutilized(ctx: StrategyContext, under: int, nodes: int,
                          number_of_nodes: int) -> bool:
    """Upstream's two early exits (noted in the tally): no more under-utilized nodes than
    ``numberOfNodes``, or every node under-utilized."""
    if under <= number_of_nodes:
        ctx.tally.note = (f"{under} underutilized node(s), not more than numberOfNodes "
                          f"{number_of_nodes}: nothing to do")
        return True
    if under == nodes:
        ctx.tally.note = "all nodes are underutilized, nothing to do here"
        return True
    return False


def thresholds(value: Any, where: str, problems: Problems, label: str) -> dict[str, float]:
    """A ``{resource: percentage}`` map; upstream's sentences for an empty or out-of-range one."""
    raw = mapping(value, where, problems)
    if not raw:
        problems.add(where, f"{label} config is not valid: no resource threshold is configured")
        return {}
    parsed: dict[str, float] = {}
    for name, percent in raw.items():
        amount = number(percent, join(where, str(name)), problems)
        if amount is None:
            continue
        if not MIN_PERCENTAGE <= amount <= MAX_PERCENTAGE:
            problems.add(join(where, str(name)),
                         f"{label} config is not valid: {name} threshold not in "
                         f"[{MIN_PERCENTAGE:g}, {MAX_PERCENTAGE:g}] range")
        parsed[str(name)] = amount
    return parsed


@dataclass
class NodeUsage:
    """One node's requested amounts and allocatable, for the thresholded resources."""

    node: dict[str, Any]
    view: NodeView
    pods: list[dict[str, Any]]
    used: dict[str, float] = field(default_factory=dict)
    allocatable: dict[str, float] = field(default_factory=dict)
    # set when ``used`` is measured usage: an evicted pod then takes its measured usage away
    actual: ActualUsage | None = None

    @property
    def name(self) -> str:
        return self.view.name

    def percent(self, resource: str) -> float:
        capacity = self.allocatable.get(resource, 0.0)
        return 100.0 * self.used.get(resource, 0.0) / capacity if capacity else 0.0

    def remove(self, amounts: Mapping[str, float]) -> None:
        for resource, amount in amounts.items():
            self.used[resource] = self.used.get(resource, 0.0) - amount


def requests(view: PodView, resources: list[str]) -> dict[str, float]:
    return {r: 1.0 if r == PODS else float(view.requests.get(r, 0)) for r in resources}


def measured(pod: dict[str, Any], actual: ActualUsage, resources: list[str]) -> dict[str, float]:
    """usageclients.go actualUsageClient.podUsage: the pod's PodMetrics, pods counted as 1."""
    used = actual.pod_usage(pod)
    return {r: 1.0 if r == PODS else float(used.get(r, 0)) for r in resources}


def node_usage(
    node: dict[str, Any], pods: list[dict[str, Any]], resources: list[str], ctx: StrategyContext,
    actual: ActualUsage | None = None,
) -> NodeUsage:
    view = ctx.state.node_view(node)
    if actual is not None:
        return actual_node_usage(node, view, pods, resources, actual)
    usage = NodeUsage(node, view, pods)
    for resource in resources:
        usage.allocatable[resource] = float(view.allocatable.get(resource, 0))
        usage.used[resource] = 0.0
    used = usage.used
    for pod in pods:  # requests() summed in place: one dict per node, not one per pod
        asked = ctx.state.view(pod).requests
        for resource in resources:
            used[resource] += 1.0 if resource == PODS else float(asked.get(resource, 0))
    return usage


def actual_node_usage(node: dict[str, Any], view: NodeView, pods: list[dict[str, Any]],
                      resources: list[str], actual: ActualUsage) -> NodeUsage:
    """usageclients.go actualUsageClient.sync: cpu and memory from the metrics collector, pods
    counted; a node missing from the metrics, or a resource the metrics API does not report,
    fails the strategy with upstream's sentence. A Prometheus query's ``MetricResource`` is a
    percentage of a capacity of 100 (prometheusUsageClient.sync,
    referencedResourceListForNodeCapacity)."""
    measured = actual.nodes.get(view.name)
    if measured is None:
        raise LookupError(f"unable to find node {view.name!r} in the collected metrics"
                          if actual.per_pod else f"unable to find metric entry for {view.name}")
    usage = NodeUsage(node, view, pods, actual=actual)
    for resource in resources:
        if resource != PODS and resource not in measured:
            raise LookupError(f"unable to find {resource!r} resource for collected "
                              f"{view.name!r} node metric")
        usage.allocatable[resource] = (100.0 if resource == METRIC_RESOURCE
                                       else float(view.allocatable.get(resource, 0)))
        usage.used[resource] = float(len(pods) if resource == PODS else measured[resource])
    return usage


def average_percent(usages: list[NodeUsage], resources: list[str]) -> dict[str, float]:
    if not usages:
        return dict.fromkeys(resources, 0.0)
    return {r: sum(u.percent(r) for u in usages) / len(usages) for r in resources}


def describe(usage: NodeUsage, resources: list[str]) -> str:
    return ", ".join(f"{r} {usage.percent(r):.0f}%" for r in resources)


def evict_into_room(
    ctx: StrategyContext, usage: NodeUsage, pods: Iterable[dict[str, Any]],
    room: dict[str, float], resources: list[str], why: str,
    done: Callable[[], bool] = lambda: False, receivers: list[NodeUsage] | None = None,
    node_limit: int | None = None,
) -> Generator[Candidate, bool, bool]:
    """Offer ``pods`` of one node for eviction while the receiving nodes have ``room``.

    Each evicted pod's requests leave the node's usage and the room. A pod that tolerates no
    receiving node's taints is passed over. Stops early when ``done()`` says the node needs no
    more or ``node_limit`` pods left it; returns True when the room ran out (the caller stops
    the whole strategy), False otherwise. When no pod's share of the node's usage is known (a
    Prometheus query), nothing is subtracted and, with no ``node_limit``, one pod leaves the
    node (nodeutilization.go evictPods: "only a single pod eviction is allowed").
    """
    shown = [r for r in resources if r in usage.used]
    unconstrained = usage.actual is not None and not usage.actual.per_pod
    evicted_here = 0
    for pod in pods:
        if done():
            return False
        if any(room[r] <= 0 for r in room):
            return True
        if node_limit is not None and evicted_here >= node_limit:
            return False
        view = ctx.state.view(pod)
        if receivers is not None and not tolerated_somewhere(view, receivers):
            ctx.tally.skipped["pod does not tolerate the taints of any node it could move to"] += 1
            continue
        if not ctx.evictable(pod):
            continue
        amounts = (requests(view, list(room)) if usage.actual is None
                   else {} if unconstrained else measured(pod, usage.actual, list(room)))
        evicted = yield Candidate(pod, f"node {usage.name} {why} ({describe(usage, shown)})")
        if evicted:
            evicted_here += 1
            if unconstrained and node_limit is None:
                return False
            usage.remove(amounts)
            for resource, amount in amounts.items():
                room[resource] -= amount
    return False
