"""RemovePodsViolatingInterPodAntiAffinity: resolve required pod anti-affinity that no longer holds.

Two running pods conflict when one's required anti-affinity term selects the other (namespaces,
labelSelector and namespaceSelector as the placement model reads them) and both nodes share the
term's ``topologyKey`` value. The documented example fixes the order (upstream's README): when podB
and podC both rule out podA, podA goes, so both can stay. Conflicts are therefore resolved greedily:
the pod in the most conflicts goes first (ties: lower priority, then BestEffort before Burstable
before Guaranteed), and evicting it clears its conflicts; pods that cannot be evicted stay and their
partners are considered instead.

Args (v1alpha2 and v1alpha1 ``params``): ``namespaces``, ``labelSelector`` (which pods may be
evicted; every pod counts as a partner).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import (
    Candidate,
    CandidateStream,
    StrategyContext,
    uid,
)
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    check_known,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1, pod_filter
from berthmaster.scheduler.model import NodeView, PodView

NAME = "RemovePodsViolatingInterPodAntiAffinity"
EXTENSION_POINT = "deschedule"
ARGS = ("namespaces", "labelSelector")


@dataclass(frozen=True)
class Params:
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    return common_v1alpha1(params)


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    return Params(pod_filter(args, where, problems))


def conflicts(
    pods: list[PodView], nodes: Mapping[str, NodeView], namespace_labels: Mapping[str, Any]
) -> dict[str, set[str]]:
    """uid -> uids it conflicts with (symmetric), over pods with required anti-affinity."""
    # topology key -> its value -> pods on nodes with that value (built once per key)
    domains: dict[str, dict[str, list[PodView]]] = {}

    def in_domain(key: str, value: str) -> list[PodView]:
        if key not in domains:
            by_value: dict[str, list[PodView]] = {}
            for p in pods:
                label = nodes[p.node_name].labels.get(key)
                if label is not None:
                    by_value.setdefault(label, []).append(p)
            domains[key] = by_value
        return domains[key].get(value, [])

    edges: dict[str, set[str]] = {}
    for pod in pods:
        node = nodes[pod.node_name]
        for term in pod.anti_required:
            value = node.labels.get(term.topology_key)
            if value is None:
                continue
            for other in in_domain(term.topology_key, value):
                if other.uid == pod.uid or not term.selector.matches(other.labels):
                    continue
                if not term.matches_namespace(other.namespace,
                                              namespace_labels.get(other.namespace)):
                    continue
                edges.setdefault(pod.uid, set()).add(other.uid)
                edges.setdefault(other.uid, set()).add(pod.uid)
    return edges


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    nodes = {n["metadata"]["name"]: ctx.state.node_view(n) for n in ctx.nodes}
    raw = [p for name in nodes for p in ctx.consider(ctx.pods_on(name))]
    by_uid = {uid(p): p for p in raw}
    views = [ctx.state.view(p) for p in raw]
    edges = conflicts(views, nodes, ctx.state.namespace_labels)
    kept: set[str] = set()  # conflicting pods that may not or could not be evicted
    while True:
        movable = [u for u, partners in edges.items() if partners and u not in kept]
        if not movable:
            return
        movable.sort(key=lambda u: (-len(edges[u]), eviction_order(by_uid[u])))
        chosen = movable[0]
        pod = by_uid[chosen]
        if not params.filter.admits(pod) or not ctx.evictable(pod):
            kept.add(chosen)
            continue
        partners = sorted(by_uid[u]["metadata"]["name"] for u in edges[chosen])
        evicted = yield Candidate(pod, "required pod anti-affinity conflict with "
                                       + ", ".join(partners[:3])
                                       + ("..." if len(partners) > 3 else ""))
        if evicted:
            for partner in edges.pop(chosen):
                edges.get(partner, set()).discard(chosen)
        else:
            kept.add(chosen)
