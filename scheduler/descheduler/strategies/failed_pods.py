"""RemoveFailedPods: evict (delete through the Eviction API) pods in phase Failed.

Args (v1alpha2): ``reasons`` (pod or container reasons; empty means any), ``exitCodes``,
``includingInitContainers``, ``excludeOwnerKinds``, ``minPodLifetimeSeconds``, ``namespaces``,
``labelSelector``. v1alpha1 keeps them under ``params.failedPods``.

``minPodLifetimeSeconds`` defaults to 3600 whichever policy version set it (upstream's
SetDefaults_RemoveFailedPodsArgs runs on v1alpha1 policies too, after their conversion), and
a pod's age is counted from its creationTimestamp, as upstream's validateCanEvict does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
    integer,
    join,
    mapping,
    strings,
)
from berthmaster.scheduler.descheduler.strategies.common import (
    common_v1alpha1,
    container_statuses,
    pod_filter,
)

NAME = "RemoveFailedPods"
EXTENSION_POINT = "deschedule"
DEFAULT_MIN_POD_LIFETIME_SECONDS = 3600
V1ALPHA1_FAILED_PODS = ("reasons", "includingInitContainers", "excludeOwnerKinds",
                        "minPodLifetimeSeconds")
ARGS = ("namespaces", "labelSelector", "reasons", "exitCodes", "includingInitContainers",
        "excludeOwnerKinds", "minPodLifetimeSeconds")


@dataclass(frozen=True)
class Params:
    reasons: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = False
    exclude_owner_kinds: tuple[str, ...] = ()
    min_pod_lifetime_seconds: int | None = DEFAULT_MIN_POD_LIFETIME_SECONDS
    filter: PodFilter = EVERY_POD


def from_v1alpha1(params: Mapping[str, Any], where: str, problems: Problems) -> dict[str, Any]:
    at = join(where, "failedPods")
    failed = mapping(params.get("failedPods"), at, problems)
    # v0.30.1 api/v1alpha1 FailedPods has no exitCodes (added to the plugin args later)
    check_known(failed, V1ALPHA1_FAILED_PODS, at, problems)
    return {**common_v1alpha1(params), **failed}


def parse(args: Mapping[str, Any], where: str, problems: Problems) -> Params:
    check_known(args, ARGS, where, problems)
    codes = args.get("exitCodes") or []
    if not isinstance(codes, list) or not all(isinstance(c, int) for c in codes):
        problems.add(join(where, "exitCodes"), f"must be a list of integers, got {codes!r}")
        codes = []
    return Params(
        strings(args.get("reasons"), join(where, "reasons"), problems),
        tuple(codes),
        boolean(args.get("includingInitContainers"), join(where, "includingInitContainers"),
                problems),
        strings(args.get("excludeOwnerKinds"), join(where, "excludeOwnerKinds"), problems),
        integer(args.get("minPodLifetimeSeconds"), join(where, "minPodLifetimeSeconds"),
                problems, default=DEFAULT_MIN_POD_LIFETIME_SECONDS, minimum=0),
        pod_filter(args, where, problems),
    )


def failure_reasons(pod: Mapping[str, Any], including_init: bool) -> set[str]:
    found = {str((pod.get("status") or {}).get("reason") or "")}
    for status in container_statuses(pod, including_init):
        state = status.get("state") or {}
        for kind in ("waiting", "terminated"):
            found.add(str((state.get(kind) or {}).get("reason") or ""))
    return found - {""}


def exit_codes(pod: Mapping[str, Any], including_init: bool) -> set[int]:
    codes = set()
    for status in container_statuses(pod, including_init):
        code = ((status.get("state") or {}).get("terminated") or {}).get("exitCode")
        if code is not None:
            codes.add(int(code))
    return codes


def decide(params: Params, ctx: StrategyContext) -> CandidateStream:
    for node in ctx.nodes:
        pods = [p for p in ctx.pods_on(node["metadata"]["name"], include_terminal=True)
                if (p.get("status") or {}).get("phase") == "Failed"]
        for pod in ctx.consider(pods):
            if not params.filter.admits(pod):
                continue
            owners = {ref.get("kind") for ref in (pod.get("metadata") or {}).get("ownerReferences")
                      or []}
            if owners & set(params.exclude_owner_kinds):
                continue
            if params.min_pod_lifetime_seconds is not None:
                created = parse_rfc3339((pod.get("metadata") or {}).get("creationTimestamp"))
                age = int((ctx.now - created).total_seconds()) if created else None
                if age is not None and age < params.min_pod_lifetime_seconds:
                    continue
            reasons = failure_reasons(pod, params.including_init_containers)
            if params.reasons and not reasons & set(params.reasons):
                continue
            if params.exit_codes and not exit_codes(pod, params.including_init_containers) & set(
                params.exit_codes
            ):
                continue
            if ctx.evictable(pod):
                shown = ", ".join(sorted(reasons)) or "no reason given"
                yield Candidate(pod, f"pod failed ({shown})")
