"""HighNodeUtilization: empty under-utilized nodes so the scheduler can pack pods tighter.

A node is under-utilized when its usage of every thresholded resource is at or below
``thresholds`` (by requests, percent of allocatable; upstream's isNodeWithLowUtilization /
isNodeBelowThreshold count a node exactly at the threshold). v1alpha1 policies also get
v0.30.1's fill-in of cpu, memory and pods at 100 % (setDefaultForThresholds). Its pods are
evicted, least used node first, while the other schedulable nodes still have room (up to 100%
of allocatable, cpu, memory and pods always counted) for what is being moved, and only pods
that tolerate some receiving node's taints.
Nothing moves when no node, or not more than ``numberOfNodes`` nodes, are under-utilized, or
when every node is. Meant for a scheduler that scores MostAllocated and an autoscaler that then
removes the emptied nodes.

Args (v1alpha2): ``thresholds``, ``numberOfNodes``, ``evictableNamespaces`` (exclude only),
``evictionModes`` (``OnlyThresholdingResources``: only pods whose containers request one of the
thresholded resources may go; upstream main's withResourceRequestForAny).
v1alpha1: ``params.nodeResourceUtilizationThresholds.thresholds``/``numberOfNodes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import CandidateStream, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    check_known,
    join,
    strings,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.utilization import (
    BASIC,
    MAX_PERCENTAGE,
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

NAME = "HighNodeUtilization"
EXTENSION_POINT = "balance"
ARGS = ("thresholds", "numberOfNodes", "evictableNamespaces", "evictionModes")
ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"


@dataclass(frozen=True)
class Params:
    thresholds: Mapping[str, float]
    number_of_nodes: int = 0
    filter: PodFilter = EVERY_POD
    only_thresholding_resources: bool = False
    v1alpha1: bool = False  # v0.30.1's fill-in of cpu/memory/pods at 100 %


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    return from_v1alpha1_thresholds(params, where, problems, ("thresholds", "numberOfNodes"))


def v1alpha1_params(params: Params) -> Params:
    return replace(params, v1alpha1=True)


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    low = thresholds(args.get("thresholds"), join(where, "thresholds"), problems, "thresholds")
    modes = strings(args.get("evictionModes"), join(where, "evictionModes"), problems)
    for mode in modes:
        if mode != ONLY_THRESHOLDING_RESOURCES:
            problems.add(join(where, "evictionModes"), f"invalid eviction mode {mode}; the only "
                                                       f"mode is {ONLY_THRESHOLDING_RESOURCES}")
    return Params(low, number_of_nodes(args, where, problems),
                  evictable_filter(args, where, problems),
                  ONLY_THRESHOLDING_RESOURCES in modes)


def requests_any(pod: Mapping[str, Any], resources: Iterable[str]) -> bool:
    """Some container (or init container) names a request for one of ``resources``."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    wanted = set(resources)
    return any(wanted & set((c.get("resources") or {}).get("requests") or {})
               for c in containers)


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    limits = dict(params.thresholds)
    if params.v1alpha1:
        limits.update({r: MAX_PERCENTAGE for r in BASIC if r not in limits})
    resources = list(limits)
    every = tracked(resources)
    usages = [node_usage(n, ctx.consider(ctx.pods_on(n["metadata"]["name"])), every, ctx)
              for n in ctx.nodes]
    under = [u for u in usages if all(u.percent(r) <= limits[r] for r in resources)]
    receivers = [u for u in usages if u not in under and not u.view.unschedulable]
    if too_few_underutilized(ctx, len(under), len(usages), params.number_of_nodes):
        return
    if not receivers:
        ctx.tally.note = "no node is above the thresholds to take the pods, nothing to do here"
        return
    room = room_on(receivers, {}, every)  # upstream's targetThresholds: 100 % everywhere
    under.sort(key=raw_total)
    for usage in under:
        pods = sorted((p for p in usage.pods if params.filter.admits(p) and (
            not params.only_thresholding_resources or requests_any(p, params.thresholds))),
            key=eviction_order)
        if (yield from evict_into_room(ctx, usage, pods, room, resources, "underutilized",
                                       receivers=receivers)):
            return
