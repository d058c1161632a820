"""RemovePodsViolatingTopologySpreadConstraint: rebalance domains whose skew exceeds maxSkew.

For each namespace and each distinct constraint its pods declare (``DoNotSchedule`` always,
``ScheduleAnyway`` too when asked), pods selected by the constraint are counted per topology
domain (the values of ``topologyKey`` over the nodes). Domains are then balanced as upstream
does: walk the smallest and largest domain towards each other, and while their difference is
above ``maxSkew`` move the smallest of (largest - average), (average - smallest) and half the
excess skew pods from the largest, evicting its most evictable pods. With
``topologyBalanceNodeFit`` (the default) a pod is only chosen when it would fit a node of the
receiving domain (``node_fit``).

Args (v1alpha2): ``constraints`` (default ``[DoNotSchedule]``), ``topologyBalanceNodeFit``,
``namespaces``, ``labelSelector``. v1alpha1: ``includeSoftConstraints`` adds ScheduleAnyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.scheduler.descheduler.context import Candidate, Decision, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    Problems,
    boolean,
    check_known,
    join,
    strings,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1, pod_filter
from berthmaster.scheduler.model import NodeView, PodView, SpreadConstraint

NAME = "RemovePodsViolatingTopologySpreadConstraint"
EXTENSION_POINT = "balance"
ARGS = ("namespaces", "labelSelector", "constraints", "topologyBalanceNodeFit")
ACTIONS = ("DoNotSchedule", "ScheduleAnyway")


@dataclass(frozen=True)
class Params:
    constraints: tuple[str, ...] = ("DoNotSchedule",)
    topology_balance_node_fit: bool = True
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    args = common_v1alpha1(params)
    soft = boolean(params.get("includeSoftConstraints"), join(where, "includeSoftConstraints"),
                   problems)
    args["constraints"] = list(ACTIONS) if soft else ["DoNotSchedule"]
    return args


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    constraints = strings(args.get("constraints"), join(where, "constraints"), problems) or (
        "DoNotSchedule",)
    for action in constraints:
        if action not in ACTIONS:
            problems.add(join(where, "constraints"),
                         f"constraint {action} is not one of {list(ACTIONS)}")
    return Params(constraints,
                  boolean(args.get("topologyBalanceNodeFit"), join(where, "topologyBalanceNodeFit"),
                          problems, default=True),
                  pod_filter(args, where, problems))


def decide(params: Params, ctx: StrategyContext) -> Decision:
    nodes = {n["metadata"]["name"]: ctx.state.node_view(n) for n in ctx.nodes}
    pods = [ctx.state.view(p) for name in nodes for p in ctx.consider(ctx.pods_on(name))]
    by_namespace: dict[str, list[PodView]] = {}
    for pod in pods:
        by_namespace.setdefault(pod.namespace, []).append(pod)
    seen: set[tuple[str, SpreadConstraint]] = set()
    # topology key -> value -> node names, computed once per key
    topology: dict[str, dict[str, list[str]]] = {}
    for pod in pods:
        for constraint in pod.spread_constraints:
            key = (pod.namespace, constraint)
            if constraint.when_unsatisfiable not in params.constraints or key in seen:
                continue
            seen.add(key)
            if constraint.topology_key not in topology:
                values: dict[str, list[str]] = {}
                for name, view in nodes.items():
                    if constraint.topology_key in view.labels:
                        values.setdefault(view.labels[constraint.topology_key], []).append(name)
                topology[constraint.topology_key] = values
            yield from balance(params, ctx, constraint, by_namespace[pod.namespace], nodes,
                               topology[constraint.topology_key])


def balance(
    params: Params, ctx: StrategyContext, constraint: SpreadConstraint,
    namespace_pods: list[PodView], nodes: Mapping[str, NodeView],
    domain_nodes: Mapping[str, list[str]],
) -> Decision:
    key = constraint.topology_key
    domains: dict[str, list[PodView]] = {value: [] for value in domain_nodes}
    if len(domains) < 2:
        return
    for pod in namespace_pods:
        value = nodes[pod.node_name].labels.get(key)
        if value is not None and constraint.selector.matches(pod.labels):
            domains[value].append(pod)
    ordered = sorted(domains.items(), key=lambda item: len(item[1]))
    counts = [len(members) for _, members in ordered]
    average = sum(counts) / len(counts)
    i, j = 0, len(ordered) - 1
    while i < j:
        if counts[j] <= average:
            j -= 1
            continue
        if counts[j] - counts[i] <= constraint.max_skew:
            i += 1
            continue
        # At most what the large domain holds above average, what the small one lacks below
        # it, and half the excess skew (each move narrows the gap by two).
        skew = counts[j] - counts[i]
        move = int(min(math.ceil(counts[j] - average), math.ceil(average - counts[i]),
                       math.ceil((skew - constraint.max_skew) / 2)))
        if move <= 0:
            i += 1
            continue
        receivers = domain_nodes[ordered[i][0]]
        moved = 0
        for view in sorted(ordered[j][1], key=lambda v: eviction_order(v.raw)):
            if moved == move:
                break
            raw = dict(view.raw)
            if not params.filter.admits(raw) or not ctx.evictable(raw):
                continue
            if params.topology_balance_node_fit and not ctx.any_node_fits(raw, receivers):
                ctx.tally.skipped["does not fit any node of the smaller topology domain"] += 1
                continue
            evicted = yield Candidate(raw, f"{key}={ordered[j][0]} has {counts[j]} pods, "
                                           f"{key}={ordered[i][0]} {counts[i]} "
                                           f"(maxSkew {constraint.max_skew})")
            if evicted:
                moved += 1
        if moved == 0:
            # Nothing could leave the largest domain: it cannot shrink, try the next one.
            j -= 1
            continue
        counts[j] -= moved
        counts[i] += moved
