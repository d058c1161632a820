"""What every strategy module shares: the ``namespaces``/``labelSelector`` arguments, the
v1alpha1 ``params`` keys, and small pod accessors.

Design: a strategy reads its v1alpha2 plugin ``args``; a v1alpha1 strategy's ``params`` are first
mapped onto those args (``from_v1alpha1``), as upstream did while migrating, so there is one
parser and one validator per strategy whichever policy version the user wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.fields import (
    PodFilter,
    join,
    label_selector,
    namespaces,
)

# v1alpha1 StrategyParameters: the keys a strategy's ``params`` may hold (any strategy).
V1ALPHA1_PARAMS = (
    "nodeResourceUtilizationThresholds", "nodeAffinityType", "podsHavingTooManyRestarts",
    "podLifeTime", "removeDuplicates", "failedPods", "includeSoftConstraints", "namespaces",
    "thresholdPriority", "thresholdPriorityClassName", "labelSelector", "nodeFit",
    "includePreferNoSchedule", "excludedTaints", "includedTaints",
)


def pod_filter(args: Mapping[str, Any], where: str, problems: Problems) -> PodFilter:
    return PodFilter(
        namespaces(args.get("namespaces"), join(where, "namespaces"), problems)
        if args.get("namespaces") is not None else None,
        label_selector(args.get("labelSelector"), join(where, "labelSelector"), problems),
    )


def common_v1alpha1(params: Mapping[str, Any], with_selector: bool = True) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if params.get("namespaces") is not None:
        args["namespaces"] = params["namespaces"]
    if with_selector and params.get("labelSelector") is not None:
        args["labelSelector"] = params["labelSelector"]
    return args


def meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name", ""))


def container_statuses(pod: Mapping[str, Any], including_init: bool) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    found = list(status.get("containerStatuses") or [])
    if including_init:
        found += list(status.get("initContainerStatuses") or [])
    return found


def in_states(pod: Mapping[str, Any], states: tuple[str, ...]) -> bool:
    """Whether the pod's phase, or a container's waiting reason, is one of ``states`` (any when
    ``states`` is empty), as PodLifeTime and RemovePodsHavingTooManyRestarts read ``states``."""
    if not states:
        return True
    if (pod.get("status") or {}).get("phase") in states:
        return True
    return any(
        ((status.get("state") or {}).get("waiting") or {}).get("reason") in states
        for status in container_statuses(pod, including_init=True)
    )
