"""RemovePodsViolatingTopologySpreadConstraint: rebalance domains whose skew exceeds maxSkew.

For each namespace and each distinct constraint its pods declare (``DoNotSchedule`` always,
``ScheduleAnyway`` too when asked), pods selected by the constraint are counted per topology
domain (the values of ``topologyKey`` over the nodes). Domains are then balanced as upstream
does: walk the smallest and largest domain towards each other, and while their difference is
above ``maxSkew`` move the smallest of (largest - average), (average - smallest) and half the
excess skew pods from the largest, evicting its most evictable pods. With
``topologyBalanceNodeFit`` (the default) a pod is only chosen when it would fit a node of the
receiving domain (``node_fit``).

Domains are taken over the nodes eligible for the pods of the constraint, as kube-scheduler
counts them: with ``nodeAffinityPolicy: Honor`` (the default) only nodes matching the pod's
nodeSelector and required node affinity, with ``nodeTaintsPolicy: Honor`` only nodes whose
NoSchedule/NoExecute taints the pod tolerates; pods on other nodes are not counted. The same
constraint declared by pods with different node affinity or tolerations is therefore balanced
separately, once per distinct eligibility.

Args (v1alpha2): ``constraints`` (default ``[DoNotSchedule]``), ``topologyBalanceNodeFit``,
``namespaces``, ``labelSelector``. v1alpha1: ``includeSoftConstraints`` adds ScheduleAnyway.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import Candidate, CandidateStream, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    boolean,
    check_known,
    join,
    strings,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1, pod_filter
from berthmaster.scheduler.model import LabelSelector, NodeView, PodView, SpreadConstraint
from berthmaster.scheduler.plugins import node_affinity
from berthmaster.scheduler.plugins.taint_toleration import untolerated_taint

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


def eligible(pod: PodView, constraint: SpreadConstraint, node: NodeView) -> bool:
    """Whether ``node`` takes part in ``constraint``'s domains for ``pod`` (see above)."""
    if constraint.topology_key not in node.labels:
        return False
    if constraint.node_affinity_policy != "Ignore" and not node_affinity.fits(
            pod, node.name, node.labels):
        return False
    return not (constraint.node_taints_policy == "Honor"
                and untolerated_taint(pod.tolerations, node.taints) is not None)


def _eligibility(pod: PodView, constraint: SpreadConstraint) -> tuple[object, ...]:
    """What decides which nodes are eligible: pods alike here share the domains."""
    return (constraint.topology_key,
            constraint.node_affinity_policy != "Ignore",
            tuple(sorted(pod.node_selector.items()))
            if constraint.node_affinity_policy != "Ignore" else (),
            pod.required_node_affinity if constraint.node_affinity_policy != "Ignore" else None,
            constraint.node_taints_policy == "Honor",
            pod.tolerations if constraint.node_taints_policy == "Honor" else ())


def _label_key(pod: PodView) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pod.labels.items()))


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    nodes = {n["metadata"]["name"]: ctx.state.node_view(n) for n in ctx.nodes}
    pods = [ctx.state.view(p) for name in nodes for p in ctx.consider(ctx.pods_on(name))]
    by_namespace: dict[str, NamespacePods] = {}
    for pod in pods:
        group = by_namespace.get(pod.namespace)
        if group is None:
            group = by_namespace[pod.namespace] = NamespacePods()
        group.add(pod)
    seen: set[tuple[str, SpreadConstraint, tuple[object, ...]]] = set()
    # Which nodes take part, and in which domain, depends on the pod and the constraint only
    # through _eligibility: worked out once per distinct answer, not once per constraint (each
    # owner's constraint has its own selector; all of them usually share one node set).
    domains_by_eligibility: dict[tuple[object, ...], Domains] = {}
    for pod in pods:
        for constraint in pod.spread_constraints:
            eligibility = _eligibility(pod, constraint)
            key = (pod.namespace, constraint, eligibility)
            if constraint.when_unsatisfiable not in params.constraints or key in seen:
                continue
            seen.add(key)
            domains = domains_by_eligibility.get(eligibility)
            if domains is None:
                domains = domains_by_eligibility[eligibility] = Domains({
                    name: view.labels[constraint.topology_key]
                    for name, view in nodes.items() if eligible(pod, constraint, view)})
            yield from balance(params, ctx, constraint, by_namespace[pod.namespace], domains)


class Domains:
    """The eligible nodes grouped by their value of the topology key."""

    def __init__(self, domain_of: dict[str, str]):
        self.domain_of = domain_of  # eligible node -> its domain
        self.nodes: dict[str, list[str]] = {}  # domain -> its nodes
        for name, value in domain_of.items():
            self.nodes.setdefault(value, []).append(name)


class NamespacePods:
    """One namespace's pods grouped by their labels: a constraint's selector is matched once
    per distinct label set — only the sets holding a label its first ``In`` requirement (a
    ``matchLabels`` entry) asks for — and only the pods it picks are walked."""

    def __init__(self) -> None:
        self.count = 0
        # label set -> its labels, and its pods with their place in the listing
        self.label_sets: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self.members: dict[tuple[tuple[str, str], ...], list[tuple[int, PodView]]] = {}
        self.with_label: dict[tuple[str, str], list[tuple[tuple[str, str], ...]]] = {}

    def add(self, pod: PodView) -> None:
        key = _label_key(pod)
        if key not in self.label_sets:
            self.label_sets[key] = pod.labels
            self.members[key] = []
            for pair in key:
                self.with_label.setdefault(pair, []).append(key)
        self.members[key].append((self.count, pod))
        self.count += 1

    def _candidates(self, selector: LabelSelector) -> Iterable[tuple[tuple[str, str], ...]]:
        for requirement in selector.requirements:
            if requirement.operator == "In":
                return [key for value in requirement.values
                        for key in self.with_label.get((requirement.key, value), ())]
        return self.label_sets

    def selected(self, constraint: SpreadConstraint) -> list[PodView]:
        """The pods the constraint's selector picks, in listing order."""
        selector = constraint.selector
        chosen = [self.members[key] for key in self._candidates(selector)
                  if selector.matches(self.label_sets[key])]
        if len(chosen) == 1:
            return [pod for _, pod in chosen[0]]
        return [pod for _, pod in sorted((member for group in chosen for member in group),
                                         key=lambda member: member[0])]


def balance(
    params: Params, ctx: StrategyContext, constraint: SpreadConstraint,
    namespace_pods: NamespacePods, eligible_domains: Domains,
) -> CandidateStream:
    key = constraint.topology_key
    domain_nodes = eligible_domains.nodes
    if len(domain_nodes) < 2:
        return
    domains: dict[str, list[PodView]] = {value: [] for value in domain_nodes}
    domain_of = eligible_domains.domain_of
    for pod in namespace_pods.selected(constraint):
        domain = domain_of.get(pod.node_name)
        if domain is not None:
            domains[domain].append(pod)
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
