"""RemovePodsViolatingNodeTaints: evict pods that do not tolerate their node's NoSchedule taints.

Taints with effect NoSchedule count (PreferNoSchedule too with ``includePreferNoSchedule``);
``excludedTaints`` ignores taints by ``key`` or ``key=value``, ``includedTaints`` keeps only
those (at most one of the two). Toleration matching is the placement model's.

Args (v1alpha2 and v1alpha1 ``params``): ``includePreferNoSchedule``, ``excludedTaints``,
``includedTaints``, ``namespaces``, ``labelSelector``.
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
    boolean,
    check_known,
    join,
    strings,
)
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1, pod_filter
from berthmaster.scheduler.model import NodeView, Taint, tolerates_all

NAME = "RemovePodsViolatingNodeTaints"
EXTENSION_POINT = "deschedule"
ARGS = ("namespaces", "labelSelector", "includePreferNoSchedule", "excludedTaints",
        "includedTaints")


@dataclass(frozen=True)
class Params:
    include_prefer_no_schedule: bool = False
    excluded_taints: tuple[str, ...] = ()
    included_taints: tuple[str, ...] = ()
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    args = common_v1alpha1(params)
    for key in ARGS[2:]:
        if params.get(key) is not None:
            args[key] = params[key]
    return args


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    excluded = strings(args.get("excludedTaints"), join(where, "excludedTaints"), problems)
    included = strings(args.get("includedTaints"), join(where, "includedTaints"), problems)
    if excluded and included:
        problems.add(where, "either includedTaints or excludedTaints can be set, but not both")
    return Params(
        boolean(args.get("includePreferNoSchedule"), join(where, "includePreferNoSchedule"),
                problems),
        excluded, included, pod_filter(args, where, problems),
    )


def named_by(taint: Taint, names: tuple[str, ...]) -> bool:
    """``key`` names every taint with that key, ``key=value`` only that value."""
    return any(n == taint.key or n == f"{taint.key}={taint.value}" for n in names)


def relevant_taints(params: Params, node: NodeView) -> list[Taint]:
    effects = {"NoSchedule", "PreferNoSchedule"} if params.include_prefer_no_schedule else {
        "NoSchedule"}
    taints = [t for t in node.taints if t.effect in effects]
    if params.included_taints:
        return [t for t in taints if named_by(t, params.included_taints)]
    return [t for t in taints if not named_by(t, params.excluded_taints)]


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    for node in ctx.nodes:
        taints = relevant_taints(params, ctx.state.node_view(node))
        for pod in ctx.consider(ctx.pods_on(node["metadata"]["name"])):
            if not taints or not params.filter.admits(pod):
                continue
            untolerated = tolerates_all(ctx.state.view(pod).tolerations, taints)
            if untolerated is not None and ctx.evictable(pod):
                yield Candidate(pod, f"does not tolerate taint {untolerated.key}="
                                     f"{untolerated.value}:{untolerated.effect} on node "
                                     f"{node['metadata']['name']}")
