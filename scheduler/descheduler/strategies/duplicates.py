"""RemoveDuplicates: at most an even share of one owner's pods on each node.

Two pods are duplicates when they sit on the same node, in the same namespace, with the same
owner (kind and name) and the same container images. Upstream's balancing applies: for each
owner with duplicates, the nodes its pods could run on are counted (``node_fit``), and a node
keeps ``ceil(replicas / feasible nodes)`` of them; the rest are evicted. With fewer than two
feasible nodes nothing moves (the pods would come straight back).

Args (v1alpha2): ``excludeOwnerKinds``, ``namespaces``. v1alpha1:
``params.removeDuplicates.excludeOwnerKinds``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import (
    Candidate,
    CandidateStream,
    StrategyContext,
)
from berthmaster.scheduler.descheduler.fields import (
    Namespaces,
    PodFilter,
    check_known,
    join,
    mapping,
    namespaces,
    strings,
)
from berthmaster.scheduler.descheduler.protection import eviction_order
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1

NAME = "RemoveDuplicates"
EXTENSION_POINT = "balance"
ARGS = ("namespaces", "excludeOwnerKinds")


@dataclass(frozen=True)
class Params:
    exclude_owner_kinds: tuple[str, ...] = ()
    namespaces: Namespaces | None = None


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    at = join(where, "removeDuplicates")
    raw = mapping(params.get("removeDuplicates"), at, problems)
    check_known(raw, ("excludeOwnerKinds",), at, problems)
    return {**common_v1alpha1(params, with_selector=False), **raw}


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    return Params(
        strings(args.get("excludeOwnerKinds"), join(where, "excludeOwnerKinds"), problems),
        namespaces(args.get("namespaces"), join(where, "namespaces"), problems)
        if args.get("namespaces") is not None else None,
    )


def owner_keys(pod: Mapping[str, Any]) -> list[str]:
    meta = pod.get("metadata") or {}
    images = ",".join(sorted(str(c.get("image")) for c in (pod.get("spec") or {}).get("containers")
                             or []))
    return [f"{meta.get('namespace')}/{ref.get('kind')}/{ref.get('name')}/{images}"
            for ref in meta.get("ownerReferences") or []]


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    excluded = set(params.exclude_owner_kinds)
    scope = PodFilter(params.namespaces)
    # owner key -> node -> duplicate pods on that node (the first of each owner is not listed)
    duplicates: dict[str, dict[str, list[dict[str, Any]]]] = {}
    replicas: dict[str, int] = {}
    for node in ctx.nodes:
        node_name = node["metadata"]["name"]
        seen: set[str] = set()
        for pod in ctx.consider(ctx.pods_on(node_name)):
            if not scope.admits(pod) or not ctx.evictable(pod):
                continue
            refs = (pod.get("metadata") or {}).get("ownerReferences") or []
            if any(ref.get("kind") in excluded for ref in refs):
                continue
            keys = owner_keys(pod)
            for key in keys:
                replicas[key] = replicas.get(key, 0) + 1
            repeated = [k for k in keys if k in seen]
            seen.update(keys)
            if repeated:
                duplicates.setdefault(repeated[0], {}).setdefault(node_name, []).append(pod)
    for key, by_node in duplicates.items():
        sample = next(iter(by_node.values()))[0]
        feasible = ctx.feasible_nodes(sample, ctx.state.node_order)
        if len(feasible) < 2:
            ctx.tally.skipped["less than two feasible nodes for duplicates to land"] += sum(
                len(pods) for pods in by_node.values())
            continue
        upper = math.ceil(replicas[key] / len(feasible))
        for node_name, pods in sorted(by_node.items()):
            # This node holds len(pods) + 1 of the owner's pods; keep `upper` of them.
            excess = len(pods) + 1 - upper
            for pod in sorted(pods, key=eviction_order)[:max(0, excess)]:
                yield Candidate(pod, f"duplicate of {key.rsplit('/', 1)[0]} on {node_name} "
                                     f"({len(pods) + 1} there, {upper} per node)")
