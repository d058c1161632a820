"""MatchInterPodAffinity and InterPodAffinityPriority (kube-scheduler: InterPodAffinity).

Filter, with the pod-only work done once per decision (as upstream's PreFilter):

1. the incoming pod's required affinity: topology domains holding a pod that matches *all* its
   terms; a node must carry every term's topology key and sit in such a domain for each term.
   The first-pod exception: when no pod anywhere matches and the pod matches its own terms, any
   node carrying the keys passes;
2. the incoming pod's required anti-affinity: domains holding a matching pod are barred;
3. existing pods' required anti-affinity in the other direction: domains of existing pods whose
   terms match the incoming pod are barred.

Term namespaces: ``namespaces`` plus ``namespaceSelector`` (empty selector = all namespaces),
defaulting to the pod's own namespace. Domains are turned into node-name sets through the
snapshot's label index, so the per-node check is three set lookups. The barred domains' nodes
(2 and 3) come from tallies the snapshot keeps up to date pod by pod (``domains``): reading
them costs nothing per matching pod, and the engine leaves barred nodes out of its walk (an
``ExcludingCheck``); required affinity declares exactly the nodes that pass (a
``NarrowedCheck``). Existing pods' terms are
read from the snapshot's term index: each distinct term is matched once, however many pods
carry it, and only the terms whose anchor requirement the pod's labels satisfy are matched at
all (``snapshot.term_anchors``, see ``term_anchors``), so a decision costs O(the pod's labels +
the terms that could select it), not O(every distinct term in the cluster).

Score: for each node, the sum of the weights of the preferred terms (the pod's own, and
existing pods' towards it; existing pods' required affinity counts 1) satisfied by the pods in
the node's domains, anti-affinity subtracting; scaled to 0..100 between the lowest and highest
(scoring.go, NormalizeScore).
An existing pod's *required* affinity term that matches the incoming pod counts the Policy's
``hardPodAffinitySymmetricWeight`` (default 1), as upstream's
InterPodAffinity scoring (interpodaffinity/scoring.go, processExistingPod, with
``HardPodAffinityWeight``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from berthmaster.scheduler.model import AffinityTerm, PodView
from berthmaster.scheduler.plugins.base import (
    MAX_PRIORITY,
    ExcludingCheck,
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    unresolvable,
    unschedulable,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "MatchInterPodAffinity"
ALIASES = ("InterPodAffinity",)
PRIORITY_NAME = "InterPodAffinityPriority"
PRIORITY_ALIASES = ("InterPodAffinity",)
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1

_FAIL_AFFINITY = unresolvable(REASON_AFFINITY)
_FAIL_ANTI = unschedulable(REASON_ANTI_AFFINITY)
_FAIL_EXISTING = unschedulable(REASON_EXISTING_ANTI_AFFINITY)


def term_matches(term: AffinityTerm, pod: PodView, snapshot: Snapshot) -> bool:
    """Whether ``pod`` is one of the pods ``term`` selects (namespace and labels)."""
    if not term.selector.matches(pod.labels):
        return False
    if pod.namespace in term.namespaces:
        return True
    if term.namespace_selector is None:
        return False
    return term.namespace_selector.matches(snapshot.namespace_labels(pod.namespace))


def matching_pods(term: AffinityTerm, snapshot: Snapshot) -> list[PodView]:
    namespaces = term.namespaces if term.namespace_selector is None else None
    pods = snapshot.pods_matching(term.selector, namespaces)
    if term.namespace_selector is None:
        return pods
    return [p for p in pods if term.matches_namespace(p.namespace,
                                                       snapshot.namespace_labels(p.namespace))]


def _domain_nodes(snapshot: Snapshot, key: str, values: Iterable[str]) -> set[str]:
    index = snapshot.label_index.get(key, {})
    out: set[str] = set()
    for v in values:
        out |= index.get(v, set())
    return out


def _domains_of(pods: Iterable[PodView], key: str, snapshot: Snapshot) -> set[str]:
    """The domains of ``key`` holding one of ``pods``."""
    return set(_pods_per_domain(pods, key, snapshot))


def existing_anti_affinity_blocked(pod: PodView, snapshot: Snapshot) -> set[str]:
    """Nodes barred because an existing pod's required anti-affinity matches ``pod``: the
    domains holding a pod that carries such a term (the snapshot's tally per term)."""
    blocked: set[str] = set()
    for term in snapshot.term_anchors["anti_required"].candidates(pod.labels):
        if term_matches(term, pod, snapshot):
            blocked |= snapshot.carrier_domains(term).blocked
    return blocked


def anti_affinity_blocked(term: AffinityTerm, pod: PodView, snapshot: Snapshot) -> Set[str]:
    """Nodes barred by ``pod``'s own required anti-affinity ``term``: the domains holding a
    pod the term selects, ``pod`` itself left out. Read from the snapshot's tally for terms
    with explicit namespaces; a namespaceSelector's namespaces are matched pod by pod.
    The set returned may be the tally's own: read it, never change it, and do not keep it
    past the next change to the snapshot."""
    if term.namespace_selector is not None:
        pods = [p for p in matching_pods(term, snapshot) if p.uid != pod.uid]
        return _domain_nodes(snapshot, term.topology_key,
                             _domains_of(pods, term.topology_key, snapshot))
    domains = snapshot.matching_domains(term)
    own = snapshot.own_domain(pod.uid, term)
    if own is not None and domains.pods.get(own[1]) == 1:
        # the pod is the only one in its domain: that domain is not barred by the pod itself
        return domains.blocked - snapshot.label_index[term.topology_key][own[1]]
    return domains.blocked


def prefilter_state(pod: PodView, snapshot: Snapshot
                    ) -> tuple[set[str] | None, tuple[str, ...], bool, Set[str], Set[str]]:
    """(affinity-allowed nodes or None, affinity keys, first-pod exception, anti-barred nodes,
    existing-anti-barred nodes). The barred sets may be the snapshot's own: read-only."""
    allowed: set[str] | None = None
    keys: tuple[str, ...] = ()
    first_pod = False
    terms = pod.affinity_required
    if terms:
        keys = tuple(t.topology_key for t in terms)
        candidates = matching_pods(terms[0], snapshot)
        matched = [p for p in candidates if all(term_matches(t, p, snapshot) for t in terms[1:])]
        matched = [p for p in matched if p.uid != pod.uid]
        if matched:
            for t in terms:
                s = _domain_nodes(snapshot, t.topology_key,
                                  _domains_of(matched, t.topology_key, snapshot))
                allowed = s if allowed is None else allowed & s
        else:
            first_pod = all(term_matches(t, pod, snapshot) for t in terms)
            allowed = set()
    anti: Set[str] = frozenset()
    for t in pod.anti_required:
        barred = anti_affinity_blocked(t, pod, snapshot)
        anti = barred if not anti else anti | barred
    existing = existing_anti_affinity_blocked(pod, snapshot) \
        if snapshot.term_index["anti_required"] else set()
    return allowed, keys, first_pod, anti, existing


@dataclass
class InterPodAffinity(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Pod/Add", "Pod/UpdatePodLabel", "Pod/Delete", "Node/Add", "Node/UpdateNodeLabel")

    def events_for(self, pod: PodView) -> tuple[str, ...]:
        # a pod added can satisfy required affinity; it never lifts anti-affinity (its own
        # terms or existing pods'): upstream's isSchedulableAfterPodChange skips an added pod
        # that matches none of the pod's affinity terms
        if pod.affinity_required:
            return self.EVENTS
        return tuple(e for e in self.EVENTS if e != "Pod/Add")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if not pod.affinity_required and not pod.anti_required \
                and not snapshot.term_index["anti_required"]:
            return None
        allowed, keys, first_pod, anti, existing = prefilter_state(pod, snapshot)
        if allowed is None and not anti and not existing:
            return None

        def check(node: NodeInfo) -> Status | None:
            name = node.name
            if allowed is not None and name not in allowed:
                labels = node.labels
                if not first_pod or any(k not in labels for k in keys):
                    return _FAIL_AFFINITY
            if name in anti:
                return _FAIL_ANTI
            if name in existing:
                return _FAIL_EXISTING
            return None

        if allowed is not None and not first_pod:
            # every node outside the affinity domains fails, every node inside them passes
            # unless barred: declare exactly the nodes that pass
            return NarrowedCheck(check, allowed - anti - existing, exact=True)
        if anti or existing:
            return ExcludingCheck(check, anti if not existing else
                                  existing if not anti else anti | existing)
        return check


def topology_scores(pod: PodView, snapshot: Snapshot,
                    hard_pod_affinity_weight: int = HARD_POD_AFFINITY_WEIGHT
                    ) -> dict[str, dict[str, int]]:
    """topology key -> value -> summed weight, from every term that concerns ``pod``.

    Read from the snapshot's tallies, so a decision costs O(the occupied domains of each
    term), not O(the pods): the pod's own preferred terms count the pods they select per
    domain (``matching_domains``, the pod itself left out), and every existing pod's term
    that selects the pod counts its carriers per domain (``carrier_domains``). Terms with a
    namespaceSelector are matched pod by pod."""
    out: dict[str, dict[str, int]] = {}

    def add(key: str, counts: Mapping[str, int], weight: int) -> None:
        if weight and counts:
            by_value = out.setdefault(key, {})
            for value, count in counts.items():
                by_value[value] = by_value.get(value, 0) + weight * count

    for sign, terms in ((1, pod.affinity_preferred), (-1, pod.anti_preferred)):
        for t in terms:
            key = t.topology_key
            if t.namespace_selector is not None:
                pods = (p for p in matching_pods(t, snapshot) if p.uid != pod.uid)
                add(key, _pods_per_domain(pods, key, snapshot), sign * t.weight)
                continue
            add(key, snapshot.matching_domains(t).pods, sign * t.weight)
            own = snapshot.own_domain(pod.uid, t)
            if own is not None:
                add(key, {own[1]: 1}, -sign * t.weight)
    for kind, sign in (("affinity_preferred", 1), ("anti_preferred", -1),
                       ("affinity_required", 1)):
        for term in snapshot.term_anchors[kind].candidates(pod.labels):
            if term_matches(term, pod, snapshot):
                weight = hard_pod_affinity_weight if kind == "affinity_required" else term.weight
                add(term.topology_key, snapshot.carrier_domains(term, kind).pods, sign * weight)
    return out


def _pods_per_domain(pods: Iterable[PodView], key: str, snapshot: Snapshot) -> dict[str, int]:
    """Domain value of ``key`` -> how many of ``pods`` sit there (pods on unknown nodes, or on
    nodes without the key, count nowhere)."""
    nodes = snapshot.nodes
    counts: dict[str, int] = {}
    for p in pods:
        node = nodes.get(p.node_name)
        if node is not None:
            value = node.labels.get(key)
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
    return counts


@dataclass
class InterPodAffinityPriority(Priority):
    NAME = PRIORITY_NAME
    ALIASES = PRIORITY_ALIASES
    hard_pod_affinity_weight: int = HARD_POD_AFFINITY_WEIGHT
    # InterPodAffinityArgs.ignorePreferredTermsOfExistingPods: a pod without preferred terms
    # of its own is not scored at all (scoring.go, PreScore's Skip)
    ignore_preferred_terms_of_existing_pods: bool = False

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        own = bool(pod.affinity_preferred or pod.anti_preferred)
        if self.ignore_preferred_terms_of_existing_pods and not own:
            return 0
        if not own and not any(
                snapshot.term_index[k] for k in ("affinity_preferred", "anti_preferred",
                                                 "affinity_required")):
            return 0
        by_key = topology_scores(pod, snapshot, self.hard_pod_affinity_weight)
        if not by_key:
            return 0
        items = list(by_key.items())
        raw = []
        for n in nodes:
            labels = n.labels
            s = 0
            for key, values in items:
                v = labels.get(key)
                if v is not None:
                    s += values.get(v, 0)
            raw.append(s)
        # NormalizeScore: between the true lowest and highest, in Go's float order
        top, bottom = max(raw, default=0), min(raw, default=0)
        spread = top - bottom
        if spread <= 0:
            return [0] * len(raw)
        return [int(float(MAX_PRIORITY) * ((s - bottom) / spread)) for s in raw]
