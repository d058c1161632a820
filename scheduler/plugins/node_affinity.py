"""MatchNodeSelector (kube-scheduler: NodeAffinity) and NodeAffinityPriority.

Filter: ``spec.nodeSelector`` (every pair must be a node label) AND the required node affinity
(terms ORed, expressions ANDed). When every term has at least one In/Exists expression the
matching node set is computed once from the snapshot's label index and the per-node check is a
set lookup; otherwise each node is matched directly.

Score: the sum of the weights of the preferred terms a node matches, scaled to 0..100 by the
highest sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import NodeSelector, NodeSelectorTerm, PodView, Requirement
from berthmaster.scheduler.plugins.base import (
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    normalize,
    unresolvable,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "MatchNodeSelector"
ALIASES = ("NodeAffinity", "PodMatchNodeSelector")
PRIORITY_NAME = "NodeAffinityPriority"
PRIORITY_ALIASES = ("NodeAffinity",)
REASON = "node(s) didn't match Pod's node affinity/selector"
_FAIL = unresolvable(REASON)


def fits(pod: PodView, name: str, labels: Mapping[str, str]) -> bool:
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    aff = pod.required_node_affinity
    return aff is None or aff.matches(name, labels)


def _indexed(req: Requirement, snapshot: Snapshot) -> set[str] | None:
    values = snapshot.label_index.get(req.key, {})
    if req.operator == "In":
        out: set[str] = set()
        for v in req.values:
            out |= values.get(v, set())
        return out
    if req.operator == "Exists":
        out = set()
        for names in values.values():
            out |= names
        return out
    return None


def _term_nodes(term: NodeSelectorTerm, snapshot: Snapshot) -> set[str] | None:
    """Nodes matching ``term``, or None when the term has no indexable expression."""
    if not term.expressions and not term.fields:
        return set()
    found: set[str] | None = None
    rest: list[Requirement] = []
    for r in term.expressions:
        s = _indexed(r, snapshot)
        if s is None:
            rest.append(r)
        else:
            found = s if found is None else found & s
    if found is None:
        return None
    if rest or term.fields:
        nodes = snapshot.nodes
        found = {n for n in found if term.matches(n, nodes[n].labels)}
    return found


def matching_nodes(pod: PodView, snapshot: Snapshot) -> set[str] | None:
    """The set of node names ``pod`` may use, or None if it cannot be computed by index."""
    allowed: set[str] | None = None
    for k, v in pod.node_selector.items():
        s = snapshot.label_index.get(k, {}).get(v, set())
        allowed = set(s) if allowed is None else allowed & s
    aff = pod.required_node_affinity
    if aff is not None:
        union: set[str] = set()
        for term in aff.terms:
            s2 = _term_nodes(term, snapshot)
            if s2 is None:
                return None
            union |= s2
        allowed = union if allowed is None else allowed & union
    return allowed


@dataclass
class NodeAffinity(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add", "Node/UpdateNodeLabel")
    # NodeAffinityArgs.addedAffinity's required terms: every pod must match them as well
    # (nodeaffinity/node_affinity.go, addedNodeSelector)
    added: NodeSelector | None = None

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        own = self._own(pod, snapshot)
        added = self.added
        if added is None:
            return own

        def check_added(node: NodeInfo) -> Status | None:
            if not added.matches(node.name, node.labels):
                return _FAIL
            return None if own is None else own(node)  # type: ignore[operator]

        return check_added

    def _own(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        """The check of the pod's own nodeSelector and required node affinity."""
        if not pod.node_selector and pod.required_node_affinity is None:
            return None
        key = ("node-affinity", tuple(pod.node_selector.items()), pod.required_node_affinity)
        cache = snapshot.node_cache
        if key in cache:
            allowed = cache[key]
        else:
            allowed = cache[key] = matching_nodes(pod, snapshot)
        if allowed is not None:
            def check_indexed(node: NodeInfo) -> Status | None:
                return None if node.name in allowed else _FAIL
            # lets the engine skip the other nodes cheaply (see Engine.schedule)
            return NarrowedCheck(check_indexed, allowed)

        def check(node: NodeInfo) -> Status | None:
            return None if fits(pod, node.name, node.labels) else _FAIL

        return check


def preferred_score(pod: PodView, node: NodeInfo) -> int:
    total = 0
    for weight, term in pod.preferred_node_affinity:
        if term.matches(node.name, node.labels):
            total += weight
    return total


@dataclass
class NodeAffinityPriority(Priority):
    NAME = PRIORITY_NAME
    ALIASES = PRIORITY_ALIASES
    # NodeAffinityArgs.addedAffinity's preferred terms, scored beside the pod's own
    added_preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        if not pod.preferred_node_affinity and not self.added_preferred:
            return 0
        added = self.added_preferred
        return normalize([preferred_score(pod, n) + sum(
            weight for weight, term in added if term.matches(n.name, n.labels))
            for n in nodes])
