"""RemovePodsHavingTooManyRestarts: evict pods whose containers restarted too often.

Args (v1alpha2): ``podRestartThreshold`` (at least 1), ``includingInitContainers``, ``states``
(``Running`` or ``CrashLoopBackOff``; empty means any), ``namespaces``, ``labelSelector``.
v1alpha1 keeps the first two under ``params.podsHavingTooManyRestarts``.
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
)
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    boolean,
    check_known,
    integer,
    join,
    mapping,
    strings,
)
from berthmaster.scheduler.descheduler.strategies.common import (
    common_v1alpha1,
    container_statuses,
    in_states,
    pod_filter,
)

NAME = "RemovePodsHavingTooManyRestarts"
EXTENSION_POINT = "deschedule"
ARGS = ("namespaces", "labelSelector", "podRestartThreshold", "includingInitContainers", "states")
ALLOWED_STATES = ("CrashLoopBackOff", "Running")


@dataclass(frozen=True)
class Params:
    pod_restart_threshold: int
    including_init_containers: bool = False
    states: tuple[str, ...] = ()
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    at = join(where, "podsHavingTooManyRestarts")
    restarts = mapping(params.get("podsHavingTooManyRestarts"), at, problems)
    check_known(restarts, ARGS[2:], at, problems)
    return {**common_v1alpha1(params), **restarts}


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    threshold = integer(args.get("podRestartThreshold"), join(where, "podRestartThreshold"),
                        problems)
    if threshold is None or threshold < 1:
        problems.add(join(where, "podRestartThreshold"),
                     "invalid PodsHavingTooManyRestarts threshold; set podRestartThreshold to 1 "
                     "or more")
    states = strings(args.get("states"), join(where, "states"), problems)
    unknown = [s for s in states if s not in ALLOWED_STATES]
    if unknown:
        problems.add(join(where, "states"),
                     f"states must be one of {list(ALLOWED_STATES)}, got {unknown}")
    return Params(
        threshold or 1,
        boolean(args.get("includingInitContainers"), join(where, "includingInitContainers"),
                problems),
        states,
        pod_filter(args, where, problems),
    )


def restarts(pod: Mapping[str, Any], including_init: bool) -> int:
    return sum(int(s.get("restartCount") or 0) for s in container_statuses(pod, including_init))




def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    for node in ctx.nodes:
        for pod in ctx.consider(ctx.pods_on(node["metadata"]["name"])):
            if not params.filter.admits(pod):
                continue
            count = restarts(pod, params.including_init_containers)
            if count < params.pod_restart_threshold or not in_states(pod, params.states):
                continue
            if ctx.evictable(pod):
                yield Candidate(pod, f"{count} restarts, threshold {params.pod_restart_threshold}")
