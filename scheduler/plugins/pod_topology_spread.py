"""PodTopologySpread (alias EvenPodsSpread): ``topologySpreadConstraints``.

Filter (``whenUnsatisfiable: DoNotSchedule``): count the pods matching each constraint's
selector (in the pod's namespace) per topology domain, over the nodes eligible for the
constraint (carrying all the constraints' keys; matching the pod's node affinity unless
``nodeAffinityPolicy: Ignore``; tolerated taints only when ``nodeTaintsPolicy: Honor``). A node
fits when, for every constraint, ``count(domain) + self - min(count) <= maxSkew`` (the minimum
is 0 while fewer than ``minDomains`` domains exist). A node without the key is rejected as
unresolvable. The counts come from the snapshot's per-domain tally of the selector's pods when
every node with the key is eligible (``domains``), so a decision does not walk the matching
pods; the passing domains' nodes are declared to the engine (a ``NarrowedCheck``, exact when
every constraint narrowed).

Score (``ScheduleAnyway``): fewer matching pods in the node's domains is better; each
constraint weighs log(domains + 2); scaled to 0..10, nodes without the keys score 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set
from dataclasses import dataclass

from berthmaster.scheduler.model import AffinityTerm, PodView, SpreadConstraint
from berthmaster.scheduler.plugins import node_affinity
from berthmaster.scheduler.plugins.base import (
    MAX_PRIORITY,
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    unresolvable,
    unschedulable,
)
from berthmaster.scheduler.plugins.taint_toleration import untolerated_taint
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "PodTopologySpread"
ALIASES = ("EvenPodsSpread",)
PRIORITY_NAME = "EvenPodsSpreadPriority"
PRIORITY_ALIASES = ("PodTopologySpread",)
REASON = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = (
    "node(s) didn't match pod topology spread constraints (missing required label)")
# node sets kept per topology key by allowed_nodes, at most
UNIONS = 16
_FAIL = unschedulable(REASON)
_FAIL_MISSING = unresolvable(REASON_MISSING_LABEL)


def _eligible(pod: PodView, c: SpreadConstraint, node: NodeInfo,
              keys: Sequence[str]) -> bool:
    labels = node.labels
    if any(k not in labels for k in keys):
        return False
    if c.node_affinity_policy != "Ignore" and not node_affinity.fits(pod, node.name, labels):
        return False
    return not (c.node_taints_policy == "Honor"
                and untolerated_taint(pod.tolerations, node.taints) is not None)


@dataclass(frozen=True, slots=True)
class _Eligible:
    """The nodes eligible for a constraint: name -> domain value, the domain values, and
    whether they are every node carrying the constraint's key (the snapshot's domain tallies
    then hold the counts)."""

    nodes: dict[str, str]
    values: frozenset[str]
    whole: bool


def _eligible_nodes(pod: PodView, c: SpreadConstraint, keys: Sequence[str],
                    snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> _Eligible:
    """The nodes eligible for ``c``, with their values for its key.

    Depends only on the nodes and on the pod's node affinity/tolerations, so it is cached in
    the snapshot's node cache when ``nodes`` is the whole cluster (pods of one workload share it).
    """
    whole = nodes is snapshot.node_list()
    key = None
    if whole:
        key = ("spread-eligible", c.topology_key, tuple(keys), c.node_affinity_policy,
               c.node_taints_policy, tuple(pod.node_selector.items()),
               pod.required_node_affinity,
               pod.tolerations if c.node_taints_policy == "Honor" else ())
        cached = snapshot.node_cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
    eligible = {n.name: n.labels[c.topology_key] for n in nodes if _eligible(pod, c, n, keys)}
    carrying = sum(map(len, snapshot.label_index.get(c.topology_key, {}).values()))
    out = _Eligible(eligible, frozenset(eligible.values()), whole and len(eligible) == carrying)
    if key is not None:
        snapshot.node_cache[key] = out
    return out


def domain_counts(pod: PodView, constraints: Sequence[SpreadConstraint], snapshot: Snapshot,
                  nodes: Sequence[NodeInfo]) -> list[dict[str, int]]:
    """Per constraint: topology value -> matching pods, over the eligible ``nodes``.

    When the eligible nodes are every node carrying the key, the counts are the snapshot's
    tally of the selector's pods per domain (``Snapshot.matching_domains``), less the pods
    being deleted and the pod itself; otherwise the matching pods are counted one by one."""
    keys = [c.topology_key for c in constraints]
    out: list[dict[str, int]] = []
    for c in constraints:
        eligible = _eligible_nodes(pod, c, keys, snapshot, nodes)
        if eligible.whole:
            watch = AffinityTerm(c.selector, c.topology_key, frozenset((pod.namespace,)), None)
            live = snapshot.matching_domains(watch).live
            counts = {v: live(v) for v in eligible.values}
            own = snapshot.own_domain(pod.uid, watch)
            if own is not None and not own[0].deleting:
                counts[own[1]] -= 1
            out.append(counts)
            continue
        by_node = eligible.nodes
        counts = dict.fromkeys(eligible.values, 0)
        for p in snapshot.pods_matching(c.selector, (pod.namespace,)):
            if p.deleting or p.uid == pod.uid:
                continue
            v = by_node.get(p.node_name)
            if v is not None:
                counts[v] += 1
        out.append(counts)
    return out


def allowed_nodes(plan: Sequence[tuple[str, dict[str, int], int]], snapshot: Snapshot
                  ) -> tuple[Set[str] | None, bool]:
    """The nodes the filter can pass: with the key, in a domain at or under its limit, for
    every constraint; None when that is every node with the keys (no narrowing to gain). And
    whether every node of the set passes (each constraint narrowed it, so each node carries
    every key).

    Read from the snapshot's label index, so the engine can walk only these nodes: a full
    walk of a cluster where most domains are at their limit costs a check per node. The set
    of one constraint depends only on which of its domains pass, so the last ``UNIONS`` such
    sets are kept in the node cache under those domains (pods of one workload meet the same
    sets again, and the engine's walk order per set is cached by identity). The cache is
    bounded: the passing domains of a workload that fills its domains in turn go through
    ever new subsets, and every set kept holds the names of the nodes of its domains."""
    allowed: Set[str] | None = None
    narrowed = 0
    for key, by_value, limit in plan:
        domains = snapshot.label_index.get(key, {})
        passing_values = frozenset(v for v in domains if by_value.get(v, 0) <= limit)
        if len(passing_values) == len(domains):
            continue  # every node with the key passes this constraint
        narrowed += 1
        unions: dict[frozenset[str], frozenset[str]] = snapshot.node_cache.setdefault(
            ("spread-allowed", key), {})
        passing: Set[str] | None = unions.get(passing_values)
        if passing is None:
            if len(unions) >= UNIONS:
                del unions[next(iter(unions))]  # the oldest
            passing = unions[passing_values] = frozenset().union(
                *(domains[v] for v in passing_values))
        allowed = passing if allowed is None else allowed & passing
    return allowed, narrowed == len(plan)


@dataclass
class PodTopologySpread(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Pod/Add", "Pod/Delete", "Node/Add", "Node/UpdateNodeLabel")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        hard = [c for c in pod.spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
        if not hard:
            return None
        counts = domain_counts(pod, hard, snapshot, snapshot.node_list())
        plan = []
        for c, by_value in zip(hard, counts, strict=True):
            minimum = min(by_value.values(), default=0)
            if c.min_domains is not None and len(by_value) < c.min_domains:
                minimum = 0
            self_match = 1 if c.selector.matches(pod.labels) else 0
            plan.append((c.topology_key, by_value, c.max_skew + minimum - self_match))

        def check(node: NodeInfo) -> Status | None:
            labels = node.labels
            for key, by_value, limit in plan:
                v = labels.get(key)
                if v is None:
                    return _FAIL_MISSING
                if by_value.get(v, 0) > limit:
                    return _FAIL
            return None

        allowed, exact = allowed_nodes(plan, snapshot)
        # the engine's narrowing: it visits the allowed nodes alone
        return check if allowed is None else NarrowedCheck(check, allowed, exact=exact)


@dataclass
class PodTopologySpreadPriority(Priority):
    NAME = PRIORITY_NAME
    ALIASES = PRIORITY_ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        soft = [c for c in pod.spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
        if not soft:
            return 0
        keys = [c.topology_key for c in soft]
        counts = domain_counts(pod, soft, snapshot, snapshot.node_list())
        weights = []
        for c in soft:
            domains = {n.labels[c.topology_key] for n in nodes if c.topology_key in n.labels}
            weights.append(math.log(len(domains) + 2))
        raw: list[int | None] = []
        for n in nodes:
            if any(k not in n.labels for k in keys):
                raw.append(None)
                continue
            s = 0.0
            for c, by_value, w in zip(soft, counts, weights, strict=True):
                s += by_value.get(n.labels[c.topology_key], 0) * w + (c.max_skew - 1)
            raw.append(round(s))
        present = [s for s in raw if s is not None]
        if not present:
            return 0
        top, bottom = max(present), min(present)
        if top == 0:
            return [0 if s is None else MAX_PRIORITY for s in raw]
        return [0 if s is None else MAX_PRIORITY * (top + bottom - s) // top for s in raw]
