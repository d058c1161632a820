"""Coscheduling: gang scheduling of a PodGroup's pods, all or nothing.

As kubernetes-sigs/scheduler-plugins (``pkg/coscheduling/coscheduling.go`` and
``pkg/coscheduling/core/core.go``), written against berthmaster's plugin API
(:mod:`berthmaster.scheduler.framework`); the PodGroup is scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1`` one, and a pod joins a group with the label
``scheduling.x-k8s.io/pod-group: <PodGroup name>`` (same namespace).

- **QueueSort** (:meth:`CoschedulingLifecycle.sort_key`, upstream's Less): priority, then the
  PodGroup's creation time (or the time of its last failure, so a failing group does not block
  the head of the queue), or the pod's first queueing time when it has no group, then
  ``namespace/name`` of the pod: a group's pods leave the queue one after the other.
- **PreFilter** (:class:`Coscheduling`): a pod whose group was backed off recently, has fewer
  pods than ``minMember`` (or too many gated ones), or whose ``minResources`` (with ``pods:
  minMember``) the cluster's free resources cannot hold is UnschedulableAndUnresolvable.
  berthmaster also refuses here a pod whose group label is empty or names no PodGroup
  (upstream lets such a pod through PreFilter and rejects it at Permit with ``PodGroup not
  found``; refusing at once spares an assume and unreserve per attempt and says what to fix).
  Retried on ``Pod/Add`` (a sibling arrived) and ``PodGroup/Add``/``PodGroup/Update``
  (upstream's EventsToRegister).
- **Permit**: the pod, assumed on its node, waits (``Wait``, the PodGroup's
  ``scheduleTimeoutSeconds`` or ``permitWaitingTimeSeconds``) until ``minMember`` pods of the
  group are placed (bound or assumed, the snapshot's count); the pod that completes the quorum
  allows every waiting sibling. The first pod to wait sends its parked siblings back to the
  active queue (ActivateSiblings).
- **Unreserve** (a rejection, a timeout, a failed bind of any member): every waiting sibling is
  rejected, so the whole group gives back what it holds and backs off together; the group is
  marked failed for the queue sort.
- **PostFilter** (after preemption found nothing): unless enough of the group is placed, or the
  unplaced share is within ``podGroupRejectPercentage``, the waiting siblings are rejected
  (``optimistic rejection in PostFilter``) and, with ``podGroupBackoffSeconds``, the group is
  backed off.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from berthmaster.foundation.keys import object_key
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.scheduler.framework import (
    ArgErrors,
    CycleState,
    Lifecycle,
    Wait,
    Watched,
    plugin,
)
from berthmaster.scheduler.model import PODS, PodView, quantity_value
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unresolvable
from berthmaster.scheduler.snapshot import GROUP_LABEL, NodeInfo, Snapshot

JSON = dict[str, Any]
Obj = Mapping[str, Any]

NAME = "Coscheduling"
POD_GROUP_LABEL = GROUP_LABEL  # scheduler-plugins' v1alpha1.PodGroupLabel
POD_GROUP = Watched("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
KIND = POD_GROUP.kind
DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60  # apis/config/v1/defaults.go
DEFAULT_POD_GROUP_BACKOFF_SECONDS = 0
DEFAULT_POD_GROUP_REJECT_PERCENTAGE = 10
DEFAULT_WAIT_TIME_SECONDS = 60  # pkg/util/podgroup.go DefaultWaitTime
EVENTS = ("Pod/Add", "PodGroup/Add", "PodGroup/Update")
NOT_FOUND = "PodGroup not found"  # core.PodGroupNotFound


def group_label(pod: PodView | JSON) -> str | None:
    """The pod's group label value: None without the label ("" when empty)."""
    labels = pod.labels if isinstance(pod, PodView) else (
        (pod.get("metadata") or {}).get("labels") or {})
    value = labels.get(POD_GROUP_LABEL)
    return None if value is None else str(value)


def _namespace(pod: PodView | JSON) -> str:
    if isinstance(pod, PodView):
        return pod.namespace
    return str((pod.get("metadata") or {}).get("namespace") or "")


def full_name(pod: PodView | JSON) -> str:
    """util.GetPodGroupFullName: ``namespace/group``, "" for a pod of no group."""
    name = group_label(pod)
    return f"{_namespace(pod)}/{name}" if name else ""


def min_member(group: Obj) -> int:
    return int((group.get("spec") or {}).get("minMember") or 0)


def schedule_timeout(group: Obj | None, permit_waiting: float) -> float:
    """util.GetWaitTimeDuration: the group's scheduleTimeoutSeconds, else the plugin's
    permitWaitingTimeSeconds, else 60 s."""
    seconds = ((group or {}).get("spec") or {}).get("scheduleTimeoutSeconds")
    if seconds is not None:
        return float(seconds)
    return permit_waiting or DEFAULT_WAIT_TIME_SECONDS


def members(snapshot: Snapshot, namespace: str, name: str) -> list[PodView]:
    """The group's pods the cache holds (pending ones of this scheduler and placed ones)."""
    return snapshot.group_members(namespace, name)


def placed_count(snapshot: Snapshot, namespace: str, name: str) -> int:
    """The group's pods bound or assumed on a node (upstream's assignedPodsByPG)."""
    return sum(1 for view in members(snapshot, namespace, name) if view.node_name)


def resource_gap(nodes: list[NodeInfo], wanted: Mapping[str, int], group: str
                 ) -> dict[str, int]:
    """CheckClusterResource: what of ``wanted`` the nodes' free resources cannot hold, the
    group's own placed pods counted as free (getNodeResource); empty when it fits."""
    gap = dict(wanted)
    for info in nodes:
        own = [p for p in info.pods.values() if full_name(p) == group]
        free: dict[str, int] = {PODS: info.alloc_pods - (len(info.pods) - len(own))}
        for resource, amount in info.allocatable.items():
            if resource == PODS:
                continue
            used = info.requested.get(resource, 0) - sum(p.requests.get(resource, 0)
                                                         for p in own)
            free[resource] = amount - used
        for resource in list(gap):
            gap[resource] -= free.get(resource, 0)
            if gap[resource] <= 0:
                del gap[resource]
        if not gap:
            return {}
    return gap


@dataclass
class GroupTracker:
    """What the plugin remembers between cycles (core.PodGroupManager's caches): groups
    backed off until a time, and when each group last failed (the queue sort's penalty)."""

    clock: Any = time.monotonic
    backed_off: dict[str, float] = field(default_factory=dict)
    last_failed: dict[str, float] = field(default_factory=dict)  # wall time

    def backoff(self, group: str, seconds: float) -> None:
        if seconds > 0:
            self.backed_off[group] = self.clock() + seconds

    def is_backed_off(self, group: str) -> bool:
        until = self.backed_off.get(group)
        if until is None:
            return False
        if until <= self.clock():
            del self.backed_off[group]
            return False
        return True

    def mark_failure(self, group: str) -> None:
        self.last_failed[group] = time.time()

    def clear_failure(self, group: str) -> None:
        self.last_failed.pop(group, None)


def parse_args(raw: Mapping[str, Any], errors: ArgErrors) -> dict[str, Any]:
    """CoschedulingArgs, defaulted and validated as scheduler-plugins' apis/config/v1
    defaults.go and validation_pluginargs.go (ValidateCoschedulingArgs)."""
    known = ("permitWaitingTimeSeconds", "podGroupBackoffSeconds", "podGroupRejectPercentage")
    for key in raw:
        if key not in known:
            errors.unknown(key, known)
    defaults = {"permitWaitingTimeSeconds": DEFAULT_PERMIT_WAITING_TIME_SECONDS,
                "podGroupBackoffSeconds": DEFAULT_POD_GROUP_BACKOFF_SECONDS,
                "podGroupRejectPercentage": DEFAULT_POD_GROUP_REJECT_PERCENTAGE}
    args: dict[str, Any] = {}
    for key, default in defaults.items():
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            errors.invalid(key, value, "must be an integer")
            value = default
        args[key] = value
    for key in ("permitWaitingTimeSeconds", "podGroupBackoffSeconds"):
        if args[key] < 0:
            errors.invalid(key, args[key], "must be greater than 0")
    if not 0 <= args["podGroupRejectPercentage"] <= 100:
        errors.invalid("podGroupRejectPercentage", args["podGroupRejectPercentage"],
                       "must be between 0 and 100")
    return args


def _created(group: Obj) -> float | None:
    try:
        stamp = parse_rfc3339((group.get("metadata") or {}).get("creationTimestamp"))
    except ValueError:
        return None
    return None if stamp is None else stamp.timestamp()


@dataclass
class Coscheduling(Predicate):
    """PreFilter (core.PodGroupManager.PreFilter); see the module docstring."""

    NAME: ClassVar[str] = NAME
    EVENTS: ClassVar[tuple[str, ...]] = EVENTS
    groups: GroupTracker = field(default_factory=GroupTracker)

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        return _refusal(pod, snapshot, self.groups)

    def fits(self, pod: PodView, snapshot: Snapshot, node: NodeInfo) -> bool:
        return _refusal(pod, snapshot, self.groups) is None


def _refusal(pod: PodView, snapshot: Snapshot, groups: GroupTracker) -> Status | None:
    name = group_label(pod)
    if name is None:
        return None
    namespace = pod.namespace
    if not name:
        return unresolvable(f'pod label "{POD_GROUP_LABEL}" is empty: set it to the name of a '
                            f'PodGroup in namespace "{namespace}", or remove the label')
    group = snapshot.object(KIND, namespace, name)
    if group is None:
        return unresolvable(f'{NOT_FOUND}: "{namespace}/{name}" (named by the pod\'s label '
                            f'"{POD_GROUP_LABEL}"); create the PodGroup or correct the label')
    full = object_key(namespace, name)
    if groups.is_backed_off(full):
        return unresolvable(f"podGroup {full} failed recently")
    siblings = list(members(snapshot, namespace, name))
    wanted = min_member(group)
    gap = wanted - len(siblings)
    if gap > 0:
        return unresolvable(f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                            f"current pods number: {len(siblings)}, minMember of group: "
                            f"{wanted}")
    for sibling in siblings:
        if sibling.raw.get("spec", {}).get("schedulingGates"):
            gap += 1
        if gap > 0:
            return unresolvable(f"pre-filter pod {pod.name} cannot proceed due to gated pods "
                                "in the same PodGroup")
    min_resources = (group.get("spec") or {}).get("minResources")
    if not min_resources:
        return None
    request = {str(k): quantity_value(str(k), v) for k, v in min_resources.items()}
    request[PODS] = wanted
    missing = resource_gap(snapshot.node_list(), request, full)
    if missing:
        shown = ", ".join(f"{k}:{v}" for k, v in sorted(missing.items()))
        return unresolvable(f"resource gap: map[{shown}]")
    return None


PERMIT_STATE_KEY = "PermitCoscheduling"


@dataclass
class CoschedulingLifecycle(Lifecycle):
    """QueueSort, PostFilter, Permit and Unreserve; see the module docstring. Shares its
    :class:`GroupTracker` with the profile's :class:`Coscheduling` filter."""

    NAME: ClassVar[str] = NAME
    groups: GroupTracker = field(default_factory=GroupTracker)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.handle is not None:
            own = self.handle.predicate(self.name)
            if isinstance(own, Coscheduling):
                self.groups = own.groups

    def _group(self, pod: JSON) -> Obj | None:
        name = group_label(pod)
        if not name or self.handle is None:
            return None
        return self.handle.snapshot.object(KIND, _namespace(pod), name)

    def sort_key(self, pod: JSON, priority: int, first_seen: float) -> tuple[Any, ...]:
        """Less: priority, then the group's creation (or last failure) time, then the pod's
        ``namespace/name``."""
        meta = pod.get("metadata") or {}
        created = first_seen
        full = full_name(pod)
        if full:
            failed = self.groups.last_failed.get(full)
            group = self._group(pod)
            stamp = _created(group) if group is not None else None
            if failed is not None:
                created = failed
            elif stamp is not None:
                created = stamp
        return (-priority, created, f"{meta.get('namespace', '')}/{meta.get('name', '')}")

    def permit(self, state: CycleState, pod: JSON, node: str) -> Status | Wait | None:
        name = group_label(pod)
        if not name:
            return None  # PodGroupNotSpecified
        group = self._group(pod)
        if group is None:
            return unresolvable(NOT_FOUND)
        assert self.handle is not None
        namespace = _namespace(pod)
        full = object_key(namespace, name)
        if placed_count(self.handle.snapshot, namespace, name) >= min_member(group):
            self.groups.clear_failure(full)
            for waiting in self.handle.iterate_over_waiting_pods():
                if full_name(waiting.pod) == full:
                    waiting.allow(self.name)
            return None
        if not any(full_name(w.pod) == full for w in self.handle.iterate_over_waiting_pods()):
            # the first of the group to wait activates its siblings (ActivateSiblings)
            uid = (pod.get("metadata") or {}).get("uid")
            snapshot = self.handle.snapshot
            self.handle.activate([dict(p.raw) for p in members(snapshot, namespace, name)
                                  if not p.node_name and p.uid != uid])
        return Wait(schedule_timeout(group, float(self.args.get(
            "permitWaitingTimeSeconds", DEFAULT_PERMIT_WAITING_TIME_SECONDS))))

    def _reject_waiting(self, pod: JSON, message: str) -> None:
        assert self.handle is not None
        namespace, name = _namespace(pod), group_label(pod)
        for waiting in self.handle.iterate_over_waiting_pods():
            other = waiting.pod
            if _namespace(other) == namespace and group_label(other) == name:
                waiting.reject(self.name, message)

    def unreserve(self, state: CycleState, pod: JSON, node: str) -> None:
        if self._group(pod) is None:
            return
        self._reject_waiting(pod, "rejection in Unreserve")
        self.groups.mark_failure(full_name(pod))

    def post_filter(self, pod: JSON) -> str | None:
        group = self._group(pod)
        if group is None or self.handle is None:
            return None
        namespace, name = _namespace(pod), str(group_label(pod))
        full = object_key(namespace, name)
        wanted = min_member(group)
        assigned = placed_count(self.handle.snapshot, namespace, name)
        if assigned >= wanted:
            return None
        threshold = float(self.args.get("podGroupRejectPercentage",
                                        DEFAULT_POD_GROUP_REJECT_PERCENTAGE)) / 100.0
        if wanted and (wanted - assigned) / wanted <= threshold:
            return None
        self._reject_waiting(pod, "optimistic rejection in PostFilter")
        backoff = float(self.args.get("podGroupBackoffSeconds", 0))
        if backoff and sum(1 for _ in members(self.handle.snapshot, namespace, name)) >= wanted:
            self.groups.backoff(full, backoff)
        self.groups.mark_failure(full)
        pod_name = (pod.get("metadata") or {}).get("name")
        return (f"PodGroup {full} gets rejected due to Pod {pod_name} is unschedulable even "
                "after PostFilter")


PLUGIN = plugin(filter=Coscheduling, lifecycle=CoschedulingLifecycle, args=parse_args,
                lifecycle_points=("queueSort", "postFilter", "reserve", "permit"),
                watches=(POD_GROUP,))
