"""PodLifeTime: evict pods older than ``maxPodLifeTimeSeconds``, oldest first.

Args (v1alpha2): ``maxPodLifeTimeSeconds`` (required), ``states`` (pod phases or container
waiting reasons; empty means any), ``namespaces``, ``labelSelector``. v1alpha1 keeps them under
``params.podLifeTime`` with the older ``podStatusPhases`` merged into ``states``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.scheduler.descheduler.context import (
    Candidate,
    Decision,
    StrategyContext,
    parse_time,
)
from berthmaster.scheduler.descheduler.fields import (
    EVERY_POD,
    PodFilter,
    Problems,
    check_known,
    integer,
    join,
    mapping,
    strings,
)
from berthmaster.scheduler.descheduler.strategies.common import (
    common_v1alpha1,
    in_states,
    pod_filter,
)

NAME = "PodLifeTime"
EXTENSION_POINT = "deschedule"
ARGS = ("namespaces", "labelSelector", "maxPodLifeTimeSeconds", "states")
ALLOWED_STATES = ("ContainerCreating", "Pending", "PodInitializing", "Running")


@dataclass(frozen=True)
class Params:
    max_pod_lifetime_seconds: int
    states: tuple[str, ...] = ()
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    lifetime = mapping(params.get("podLifeTime"), join(where, "podLifeTime"), problems)
    check_known(lifetime, ("maxPodLifeTimeSeconds", "podStatusPhases", "states"),
                join(where, "podLifeTime"), problems)
    args = common_v1alpha1(params)
    args["maxPodLifeTimeSeconds"] = lifetime.get("maxPodLifeTimeSeconds")
    states = list(lifetime.get("podStatusPhases") or []) + list(lifetime.get("states") or [])
    if states:
        args["states"] = states
    return args


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    seconds = integer(args.get("maxPodLifeTimeSeconds"), join(where, "maxPodLifeTimeSeconds"),
                      problems, minimum=0)
    if args.get("maxPodLifeTimeSeconds") is None:
        problems.add(join(where, "maxPodLifeTimeSeconds"),
                     "MaxPodLifeTimeSeconds not set; give the maximum pod age in seconds")
    states = strings(args.get("states"), join(where, "states"), problems)
    unknown = [s for s in states if s not in ALLOWED_STATES]
    if unknown:
        problems.add(join(where, "states"),
                     f"states must be one of {list(ALLOWED_STATES)}, got {unknown}")
    return Params(seconds or 0, states, pod_filter(args, where, problems))




def decide(params: Params, ctx: StrategyContext) -> Decision:
    old: list[tuple[Any, dict[str, Any]]] = []
    for node in ctx.nodes:
        for pod in ctx.consider(ctx.pods_on(node["metadata"]["name"])):
            if not params.filter.admits(pod):
                continue
            created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
            if created is None or not in_states(pod, params.states):
                continue
            age = (ctx.now - created).total_seconds()
            if age > params.max_pod_lifetime_seconds and ctx.evictable(pod):
                old.append((created, pod))
    old.sort(key=lambda item: item[0])
    for created, pod in old:
        age = int((ctx.now - created).total_seconds())
        yield Candidate(pod, f"pod is {age}s old, over maxPodLifeTimeSeconds "
                             f"{params.max_pod_lifetime_seconds}")
