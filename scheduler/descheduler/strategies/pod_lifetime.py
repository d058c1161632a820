"""PodLifeTime: evict pods matching its filters (age, states, conditions, exit codes), oldest
first.

Args (v1alpha2, upstream's current PodLifeTimeArgs): ``maxPodLifeTimeSeconds``, ``states``
(pod phase, pod status reason, or a container's waiting or terminated reason), ``conditions``
(``type``/``status``/``reason``/``minTimeSinceLastTransitionSeconds``; any one filter matching
any one condition), ``exitCodes`` (a container terminated with one of them),
``includingInitContainers``/``includingEphemeralContainers`` (their statuses count for
``states``; init containers also for ``exitCodes``), ``ownerKinds`` (``include`` or ``exclude``
owner kinds), ``namespaces``, ``labelSelector``. At least one of ``maxPodLifeTimeSeconds``,
``states``, ``conditions`` and ``exitCodes`` is needed; every filter given must match.

v1alpha1 keeps ``maxPodLifeTimeSeconds``/``states``/``podStatusPhases`` under
``params.podLifeTime`` and is read as v0.30.1 read it: ``maxPodLifeTimeSeconds`` is required
and ``states`` are only the 15 that release accepted (:data:`V1ALPHA1_STATES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.foundation.times import parse_rfc3339
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
    include_exclude,
    integer,
    join,
    mapping,
    strings,
)
from berthmaster.scheduler.descheduler.strategies.common import common_v1alpha1, pod_filter

NAME = "PodLifeTime"
EXTENSION_POINT = "deschedule"
ARGS = ("namespaces", "labelSelector", "ownerKinds", "maxPodLifeTimeSeconds", "states",
        "conditions", "exitCodes", "includingInitContainers", "includingEphemeralContainers")
CONDITION_FIELDS = ("type", "status", "reason", "minTimeSinceLastTransitionSeconds")

# podlifetime/validation.go ValidatePodLifeTimeArgs at v0.30.1 (the v1alpha1 release).
V1ALPHA1_STATES = (
    "Running", "Pending", "Unknown",                                      # pod phases
    "NodeAffinity", "NodeLost", "Shutdown", "UnexpectedAdmissionError",   # pod reasons
    "PodInitializing", "ContainerCreating", "ImagePullBackOff", "CrashLoopBackOff",
    "CreateContainerConfigError", "ErrImagePull", "CreateContainerError",
    "InvalidImageName",                                                   # waiting reasons
)
# podAllowedStates in upstream's current validation.go: also Succeeded/Failed and terminated
# container reasons.
ALLOWED_STATES = tuple(sorted({
    *V1ALPHA1_STATES, "Succeeded", "Failed",
    "OOMKilled", "Error", "Completed", "DeadlineExceeded", "Evicted", "ContainerCannotRun",
    "StartError",
}))


@dataclass(frozen=True)
class Condition:
    type: str = ""
    status: str = ""
    reason: str = ""
    min_seconds_since_transition: int | None = None


@dataclass(frozen=True)
class Params:
    max_pod_lifetime_seconds: int | None
    states: tuple[str, ...] = ()
    filter: PodFilter = EVERY_POD
    include_owner_kinds: frozenset[str] = frozenset()
    exclude_owner_kinds: frozenset[str] = frozenset()
    conditions: tuple[Condition, ...] = ()
    exit_codes: frozenset[int] = frozenset()
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    at = join(where, "podLifeTime")
    lifetime = mapping(params.get("podLifeTime"), at, problems)
    check_known(lifetime, ("maxPodLifeTimeSeconds", "podStatusPhases", "states"), at, problems)
    args = common_v1alpha1(params)
    seconds = lifetime.get("maxPodLifeTimeSeconds")
    if seconds is None:
        problems.add(join(at, "maxPodLifeTimeSeconds"),
                     "MaxPodLifeTimeSeconds not set; give the maximum pod age in seconds")
        seconds = 0  # reported once here; keeps parse() from adding its v1alpha2 sentence
    args["maxPodLifeTimeSeconds"] = seconds
    states = list(lifetime.get("podStatusPhases") or []) + list(lifetime.get("states") or [])
    known = [s for s in states if s in V1ALPHA1_STATES]
    if len(known) != len(states):
        problems.add(at, f"states must be one of {sorted(V1ALPHA1_STATES)}, got "
                         f"{[s for s in states if s not in V1ALPHA1_STATES]}")
    if known:
        args["states"] = known
    return args


def _owner_kinds(value: Any, where: str, problems: Problems) -> tuple[frozenset[str],
                                                                      frozenset[str]]:
    include, exclude = include_exclude(value, where, problems, "ownerKinds")
    return frozenset(include), frozenset(exclude)


def _conditions(value: Any, where: str, problems: Problems) -> tuple[Condition, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.add(where, "must be a list of {type, status, reason, "
                            "minTimeSinceLastTransitionSeconds}")
        return ()
    found = []
    for i, item in enumerate(value):
        at = join(where, i)
        raw = mapping(item, at, problems)
        check_known(raw, CONDITION_FIELDS, at, problems)
        texts = {}
        for key in ("type", "status", "reason"):
            text = raw.get(key)
            if text is not None and not isinstance(text, str):
                problems.add(join(at, key), f"must be a string, got {text!r}")
                text = None
            texts[key] = text or ""
        seconds = integer(raw.get("minTimeSinceLastTransitionSeconds"),
                          join(at, "minTimeSinceLastTransitionSeconds"), problems, minimum=0)
        if not any(texts.values()) and seconds is None:
            problems.add(at, f"conditions[{i}]: at least one of type, status, reason, or "
                             "minTimeSinceLastTransitionSeconds must be set")
        found.append(Condition(texts["type"], texts["status"], texts["reason"], seconds))
    return tuple(found)


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    seconds = integer(args.get("maxPodLifeTimeSeconds"), join(where, "maxPodLifeTimeSeconds"),
                      problems, minimum=0)
    states = strings(args.get("states"), join(where, "states"), problems)
    if any(s not in ALLOWED_STATES for s in states):
        problems.add(join(where, "states"),
                     f"states must be one of {list(ALLOWED_STATES)}, got "
                     f"{[s for s in states if s not in ALLOWED_STATES]}")
    codes = args.get("exitCodes") or []
    if not isinstance(codes, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in codes):
        problems.add(join(where, "exitCodes"), f"must be a list of integers, got {codes!r}")
        codes = []
    conditions = _conditions(args.get("conditions"), join(where, "conditions"), problems)
    if args.get("maxPodLifeTimeSeconds") is None and not (states or conditions or codes):
        problems.add(where, "at least one filtering criterion must be specified "
                            "(maxPodLifeTimeSeconds, states, conditions, or exitCodes)")
    include, exclude = _owner_kinds(args.get("ownerKinds"), join(where, "ownerKinds"), problems)
    return Params(
        seconds, states, pod_filter(args, where, problems), include, exclude, conditions,
        frozenset(codes),
        boolean(args.get("includingInitContainers"), join(where, "includingInitContainers"),
                problems),
        boolean(args.get("includingEphemeralContainers"),
                join(where, "includingEphemeralContainers"), problems),
    )


def _statuses(pod: Mapping[str, Any], params: Params, ephemeral: bool) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    found = list(status.get("containerStatuses") or [])
    if params.including_init_containers:
        found += list(status.get("initContainerStatuses") or [])
    if ephemeral and params.including_ephemeral_containers:
        found += list(status.get("ephemeralContainerStatuses") or [])
    return found


def in_states(pod: Mapping[str, Any], params: Params) -> bool:
    """Upstream's states filter: phase, pod reason, or a waiting/terminated container reason."""
    status = pod.get("status") or {}
    if status.get("phase") in params.states or status.get("reason") in params.states:
        return True
    for container in _statuses(pod, params, ephemeral=True):
        state = container.get("state") or {}
        for kind in ("waiting", "terminated"):
            if (state.get(kind) or {}).get("reason") in params.states:
                return True
    return False


def _condition_matches(pod: Mapping[str, Any], params: Params, ctx: StrategyContext) -> bool:
    for wanted in params.conditions:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if wanted.type and condition.get("type") != wanted.type:
                continue
            if wanted.status and condition.get("status") != wanted.status:
                continue
            if wanted.reason and condition.get("reason") != wanted.reason:
                continue
            if wanted.min_seconds_since_transition is not None:
                since = parse_rfc3339(condition.get("lastTransitionTime"))
                idle = (ctx.now - since).total_seconds() if since else None
                if idle is None or idle < 0 or int(idle) < wanted.min_seconds_since_transition:
                    continue
            return True
    return False


def _exit_code_matches(pod: Mapping[str, Any], params: Params) -> bool:
    return any(
        ((c.get("state") or {}).get("terminated") or {}).get("exitCode") in params.exit_codes
        for c in _statuses(pod, params, ephemeral=False)
    )


def _owner_kind_allows(pod: Mapping[str, Any], params: Params) -> bool:
    kinds = {ref.get("kind") for ref in (pod.get("metadata") or {}).get("ownerReferences") or []}
    if params.include_owner_kinds:
        return bool(kinds & params.include_owner_kinds)
    return not kinds & params.exclude_owner_kinds


def selected(pod: Mapping[str, Any], params: Params, ctx: StrategyContext) -> bool:
    """Every configured filter of upstream's PodLifeTime New() holds for ``pod``."""
    if not params.filter.admits(pod):
        return False
    if params.max_pod_lifetime_seconds is not None:
        created = parse_rfc3339((pod.get("metadata") or {}).get("creationTimestamp"))
        age = (ctx.now - created).total_seconds() if created else -1.0
        if age < 0 or int(age) <= params.max_pod_lifetime_seconds:
            return False
    if params.states and not in_states(pod, params):
        return False
    if not _owner_kind_allows(pod, params):
        return False
    if params.conditions and not _condition_matches(pod, params, ctx):
        return False
    return not params.exit_codes or _exit_code_matches(pod, params)


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    """Pods of every phase are listed (upstream's ListAllPodsOnANode), so ``states: [Failed]``
    can select terminal pods."""
    chosen: list[tuple[datetime, dict[str, Any]]] = []
    for node in ctx.nodes:
        for pod in ctx.consider(ctx.pods_on(node["metadata"]["name"], include_terminal=True)):
            if selected(pod, params, ctx) and ctx.evictable(pod):
                created = parse_rfc3339((pod.get("metadata") or {}).get("creationTimestamp"))
                chosen.append((created or ctx.now, pod))
    chosen.sort(key=lambda item: item[0])
    for created, pod in chosen:
        age = int((ctx.now - created).total_seconds())
        why = (f"over maxPodLifeTimeSeconds {params.max_pod_lifetime_seconds}"
               if params.max_pod_lifetime_seconds is not None else "matches PodLifeTime filters")
        yield Candidate(pod, f"pod is {age}s old, {why}")
