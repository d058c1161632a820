"""LowNodeUtilization: move pods off over-utilized nodes while under-utilized nodes exist.

A node is under-utilized when its usage of every thresholded resource is at or below
``thresholds``, over-utilized when any usage is above ``targetThresholds`` (the seed's
definitions; usage is by requests, as a percentage of allocatable). Unschedulable nodes never
count as under-utilized. Nothing moves when no node is under-utilized, when their number is
not above ``numberOfNodes``, when every node is under-utilized, or when none is over.

Evictions go from the most used over-utilized node down, each node's pods in eviction order,
while the node is still above target and the under-utilized nodes still have room (the sum of
their headroom up to ``targetThresholds``) for what is being moved.

Args (v1alpha2): ``thresholds``, ``targetThresholds``, ``numberOfNodes``,
``useDeviationThresholds``, ``evictableNamespaces`` (exclude only). v1alpha1:
``params.nodeResourceUtilizationThresholds`` plus ``namespaces``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.scheduler.descheduler.context import Decision, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    Problems,
    boolean,
    check_known,
    join,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.utilization import (
    NodeUsage,
    average_percent,
    evict_into_room,
    evictable_filter,
    from_v1alpha1_thresholds,
    node_usage,
    number_of_nodes,
    thresholds,
    too_few_underutilized,
)

NAME = "LowNodeUtilization"
EXTENSION_POINT = "balance"
ARGS = ("thresholds", "targetThresholds", "numberOfNodes", "useDeviationThresholds",
        "evictableNamespaces")
V1ALPHA1_KEYS = ("thresholds", "targetThresholds", "numberOfNodes", "useDeviationThresholds")


@dataclass(frozen=True)
class Params:
    thresholds: Mapping[str, float]
    target_thresholds: Mapping[str, float]
    number_of_nodes: int = 0
    use_deviation_thresholds: bool = False
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    return from_v1alpha1_thresholds(params, where, problems, V1ALPHA1_KEYS)


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
    return Params(low, high, number_of_nodes(args, where, problems), deviation,
                  evictable_filter(args, where, problems))


def bounds(params: Params, usages: list[NodeUsage]) -> tuple[dict[str, float], dict[str, float]]:
    """The low and high percentages, absolute or around the average (deviation mode)."""
    if not params.use_deviation_thresholds:
        return dict(params.thresholds), dict(params.target_thresholds)
    average = average_percent(usages, list(params.thresholds))
    low = {r: max(0.0, average[r] - params.thresholds[r]) for r in params.thresholds}
    high = {r: min(100.0, average[r] + params.target_thresholds[r]) for r in params.thresholds}
    return low, high


def decide(params: Params, ctx: StrategyContext) -> Decision:
    resources = list(params.thresholds)
    usages = [node_usage(n, ctx.consider(ctx.pods_on(n["metadata"]["name"])), resources, ctx)
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
    room = {r: sum(max(0.0, high_bound[r] / 100.0 * u.allocatable[r] - u.used[r]) for u in under)
            for r in resources}
    over.sort(key=lambda u: [u.percent(r) for r in resources], reverse=True)
    for usage in over:
        pods = sorted((p for p in usage.pods if params.filter.admits(p)), key=eviction_order)

        def on_target(usage: NodeUsage = usage) -> bool:
            return not any(usage.percent(r) > high_bound[r] for r in resources)

        if (yield from evict_into_room(ctx, usage, pods, room, resources, "over target",
                                       done=on_target)):
            return
