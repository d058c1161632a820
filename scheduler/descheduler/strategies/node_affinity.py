"""RemovePodsViolatingNodeAffinity: evict pods whose node no longer satisfies their affinity.

``requiredDuringSchedulingIgnoredDuringExecution``: a pod that has a required node affinity
whose node no longer matches it (that affinity, or its nodeSelector), and some other node
would take it. A pod with only a ``nodeSelector`` is left alone, as upstream's
PodHasNodeAffinity gate does.
``preferredDuringSchedulingIgnoredDuringExecution``: another node that would take it matches
more of its preferred terms (by weight) than its current node. Matching is the placement
model's node selector logic; "would take it" is ``node_fit`` (the engine).

Args (v1alpha2 and v1alpha1 ``params``): ``nodeAffinityType`` (required), ``namespaces``,
``labelSelector``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import Candidate, CandidateStream, StrategyContext
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    check_known,
    join,
    strings,
)
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1, pod_filter
from berthmaster.scheduler.model import NodeView, PodView

NAME = "RemovePodsViolatingNodeAffinity"
EXTENSION_POINT = "deschedule"
ARGS = ("namespaces", "labelSelector", "nodeAffinityType")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class Params:
    node_affinity_type: tuple[str, ...]
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    args = common_v1alpha1(params)
    if params.get("nodeAffinityType") is not None:
        args["nodeAffinityType"] = params["nodeAffinityType"]
    return args


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    types = strings(args.get("nodeAffinityType"), join(where, "nodeAffinityType"), problems)
    if not types:
        problems.add(join(where, "nodeAffinityType"),
                     f"nodeAffinityType needs to be set; use [{REQUIRED!r}]")
    for kind in types:
        if kind not in (REQUIRED, PREFERRED):
            problems.add(join(where, "nodeAffinityType"),
                         f"invalid nodeAffinityType {kind!r}; expected {REQUIRED} or {PREFERRED}")
    return Params(types, pod_filter(args, where, problems))


def satisfies_required(pod: PodView, node: NodeView) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    return pod.required_node_affinity is None or pod.required_node_affinity.matches(
        node.name, node.labels)


def has_required_affinity(pod: Mapping[str, Any]) -> bool:
    """Upstream's PodHasNodeAffinity(required): the field is set (even with no terms)."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return affinity.get(REQUIRED) is not None


def preferred_score(pod: PodView, node: NodeView) -> int:
    return sum(w for w, term in pod.preferred_node_affinity if term.matches(node.name, node.labels))


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    views = {n["metadata"]["name"]: ctx.state.node_view(n) for n in ctx.nodes}
    for node in ctx.nodes:
        here = views[node["metadata"]["name"]]
        for pod in ctx.consider(ctx.pods_on(here.name)):
            if not params.filter.admits(pod):
                continue
            view = ctx.state.view(pod)
            if REQUIRED in params.node_affinity_type and has_required_affinity(pod) and (
                    not satisfies_required(view, here)):
                if ctx.evictable(pod):
                    if ctx.fits_other_node(pod):
                        yield Candidate(pod, f"node {here.name} no longer satisfies its required "
                                             "node affinity")
                    else:
                        ctx.tally.skipped["no other node satisfies its node affinity"] += 1
                continue
            if PREFERRED in params.node_affinity_type and view.preferred_node_affinity:
                current = preferred_score(view, here)
                better = [name for name, other in views.items() if name != here.name
                          and preferred_score(view, other) > current]
                if better and ctx.any_node_fits(pod, better) and ctx.evictable(pod):
                    yield Candidate(pod, "another node matches more of its preferred node "
                                         f"affinity than {here.name}")
