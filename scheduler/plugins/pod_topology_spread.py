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

Score (``ScheduleAnyway``, and the system default constraints for pods of services and
controllers that have none): see :class:`PodTopologySpreadPriority`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence, Set
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
                  nodes: Sequence[NodeInfo], keys: Sequence[str] | None = None
                  ) -> list[dict[str, int]]:
    """Per constraint: topology value -> matching pods, over the eligible ``nodes``.

    When the eligible nodes are every node carrying the key, the counts are the snapshot's
    tally of the selector's pods per domain (``Snapshot.matching_domains``), less the pods
    being deleted and the pod itself; otherwise the matching pods are counted one by one."""
    if keys is None:  # a node must carry every constraint's key to count
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
    # the profile's PodTopologySpreadArgs defaults (defaultingType List may list DoNotSchedule
    # ones; the System defaults are all ScheduleAnyway)
    default_constraints: tuple[DefaultConstraint, ...] = ()

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if pod.spread_constraints:
            hard = [c for c in pod.spread_constraints
                    if c.when_unsatisfiable == "DoNotSchedule"]
        else:
            # plugin.go, getConstraints: a pod with no constraints of its own is filtered by
            # the profile's DoNotSchedule defaults, with the selector of what selects it
            # (common.go, buildDefaultConstraints), as filtering.go, calPreFilterState
            hard = list(defaulted_constraints(pod, snapshot, self.default_constraints,
                                              "DoNotSchedule"))
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


# apis/config/v1/defaults.go: the system default constraints (defaultingType System)
SYSTEM_DEFAULT_CONSTRAINTS: tuple[tuple[str, int], ...] = (
    ("kubernetes.io/hostname", 3), ("topology.kubernetes.io/zone", 5))
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class DefaultConstraint:
    """A PodTopologySpreadArgs default constraint: the selector is the pod's own, deduced from
    the services and controllers that select it."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


def default_constraints(defaulting: str, listed: Sequence[object] = ()
                        ) -> tuple[DefaultConstraint, ...]:
    """The profile's default constraints: the system's, or the listed ones."""
    if defaulting == "System":
        return tuple(DefaultConstraint(skew, key, "ScheduleAnyway")
                     for key, skew in SYSTEM_DEFAULT_CONSTRAINTS)
    out = []
    for raw in listed:
        c = raw if isinstance(raw, dict) else {}
        out.append(DefaultConstraint(int(c.get("maxSkew", 1)), str(c.get("topologyKey", "")),
                                     str(c.get("whenUnsatisfiable", "DoNotSchedule")),
                                     str(c.get("nodeAffinityPolicy") or "Honor"),
                                     str(c.get("nodeTaintsPolicy") or "Ignore")))
    return tuple(out)


def defaulted_constraints(pod: PodView, snapshot: Snapshot,
                          defaults: Sequence[DefaultConstraint], action: str
                          ) -> tuple[SpreadConstraint, ...]:
    """common.go, buildDefaultConstraints: the defaults of ``action`` with the selector of
    the services, RCs, ReplicaSets and StatefulSets selecting the pod (helper/spread.go,
    DefaultSelector: every selector's requirements at once); none when nothing selects it."""
    wanted = [d for d in defaults if d.when_unsatisfiable == action]
    if not wanted:
        return ()
    selector = snapshot.default_selector(pod)
    if selector.empty:
        return ()
    return tuple(SpreadConstraint(d.max_skew, d.topology_key, action, selector, None,
                                  d.node_affinity_policy, d.node_taints_policy)
                 for d in wanted)


def _round(value: float) -> int:
    """Go's math.Round for the non-negative scores here: halves away from zero."""
    return math.floor(value + 0.5)


@dataclass
class PodTopologySpreadPriority(Priority):
    """Score as 1.35's podtopologyspread/scoring.go: per node, over the constraints whose key
    it carries, ``count * log(domains + 2) + maxSkew - 1`` rounded, where ``count`` is the
    matching pods in the node's domain (on the node itself for the hostname key) over the
    nodes the constraint includes, and ``domains`` the distinct values among the scored nodes
    (the scored nodes themselves for the hostname key). A pod's own constraints need every
    key on a node (nodes without them are ignored and score 0); the system defaults do not.
    Normalised as ``100 * (max + min - s) // max`` over the nodes not ignored."""

    NAME = PRIORITY_NAME
    ALIASES = PRIORITY_ALIASES
    default_constraints: tuple[DefaultConstraint, ...] = ()
    # defaultingType System: the pod need not carry every key of the system defaults
    system_defaulted: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.default_constraints and self.system_defaulted:
            self.default_constraints = default_constraints("System")

    def _constraints(self, pod: PodView, snapshot: Snapshot
                     ) -> tuple[Sequence[SpreadConstraint], bool]:
        if pod.spread_constraints:
            return [c for c in pod.spread_constraints
                    if c.when_unsatisfiable == "ScheduleAnyway"], True
        defaulted = defaulted_constraints(pod, snapshot, self.default_constraints,
                                          "ScheduleAnyway")
        return defaulted, not self.system_defaulted

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        soft, require_all = self._constraints(pod, snapshot)
        if not soft or not len(snapshot):
            return 0
        keys = [c.topology_key for c in soft]
        ignored = [require_all and any(k not in n.labels for k in keys) for n in nodes]
        kept = len(nodes) - sum(ignored)
        weights = []
        counts: list[dict[str, int] | None] = []
        hostname_count: Callable[[NodeInfo], int] = _no_count
        for c in soft:
            if c.topology_key == HOSTNAME:
                weights.append(math.log(kept + 2))
                counts.append(None)
                hostname_count = _per_node_counter(pod, c, snapshot)
                continue
            values = {n.labels.get(c.topology_key, "")
                      for n, skip in zip(nodes, ignored, strict=True) if not skip}
            weights.append(math.log(len(values) + 2))
            counts.append(domain_counts(pod, [c], snapshot, snapshot.node_list(),
                                        keys if require_all else [c.topology_key])[0])
        raw: list[int | None] = []
        for n, skip in zip(nodes, ignored, strict=True):
            if skip:
                raw.append(None)
                continue
            s = 0.0
            for c, by_value, w in zip(soft, counts, weights, strict=True):
                value = n.labels.get(c.topology_key)
                if value is None:
                    continue
                if by_value is None:
                    count = hostname_count(n)
                else:
                    count = by_value.get(value, 0)
                s += count * w + (c.max_skew - 1)
            raw.append(_round(s))
        present = [s for s in raw if s is not None]
        if not present:
            return 0
        top, bottom = max(present), min(present)
        if top == 0:
            return [0 if s is None else MAX_PRIORITY for s in raw]
        return [0 if s is None else MAX_PRIORITY * (top + bottom - s) // top for s in raw]


def _no_count(node: NodeInfo) -> int:
    return 0


def _per_node_counter(pod: PodView, c: SpreadConstraint, snapshot: Snapshot
                      ) -> Callable[[NodeInfo], int]:
    """countPodsMatchSelector on one node (the hostname key's count): pods of the pod's
    namespace the selector matches, terminating ones left out; none for an empty selector.
    Read from the snapshot's per-hostname tally of the selector's pods, so a node costs a
    lookup, not a walk of its pods (a node's hostname label names it alone)."""
    if c.selector.empty:
        return _no_count
    watch = AffinityTerm(c.selector, HOSTNAME, frozenset((pod.namespace,)), None)
    live = snapshot.matching_domains(watch).live
    own = snapshot.own_domain(pod.uid, watch)
    own_value = own[1] if own is not None and not own[0].deleting else None

    def count(node: NodeInfo) -> int:
        value = node.labels.get(HOSTNAME)
        if value is None:
            return 0
        return live(value) - (value == own_value)

    return count
