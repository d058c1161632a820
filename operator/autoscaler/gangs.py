"""Gangs for the autoscaler: a PodGroup's pods grow the cluster together or not at all, and
scale-down never leaves a running group below its ``minMember``.

Design (pure; the PodGroup is scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` one, a pod
joins it with the ``scheduling.x-k8s.io/pod-group`` label, as :mod:`berthmaster.scheduler.plugins
.coscheduling` reads it):

- A :class:`Gang` is a PodGroup with its ``minMember`` and how many of its pods run now (bound to
  a node, not being deleted). Pods whose label names no PodGroup are not a gang: the scheduler
  refuses them anyway, and the autoscaler treats them as single pods.
- **Scale-up is all-or-nothing per gang**, modelled on cluster-autoscaler's all-or-nothing
  scale-up (the ``atomic-scale-up.kubernetes.io`` ProvisioningRequest class:
  cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go ``ScaleUp(..., allOrNothing)``,
  which rejects an option that does not fit every pod, with
  core/scaleup/orchestrator/rejectedreasons.go ``AllOrNothingReason``). A gang counts as helped
  by an option only when its running members, plus its pending members that fit existing or
  upcoming nodes, plus those the option's new nodes hold reach ``minMember``
  (:func:`short_gangs`); otherwise its pods are taken out of the option, which is estimated
  again without them, so a gang never causes a partial scale-up. Every pending member of a
  gang is considered together (:func:`with_pending_members`), not only those the scheduler
  marked unschedulable so far, so one scale-up is sized for the whole group.
- **Scale-down keeps gangs whole**: evicting a running member is allowed only while the group
  keeps at least ``minMember`` running members after every eviction the plan already counts
  (:class:`GangBudget`, spent across the nodes found unneeded like the PDB budget). A gang
  running exactly ``minMember`` pods therefore keeps every node it runs on; one running more
  may lose the surplus. Upstream has no such rule (no gang support in cluster-autoscaler); the
  reason name is berthmaster's own, :data:`POD_GROUP_MIN_MEMBER`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from berthmaster.scheduler.plugins.coscheduling import full_name, min_member

JSON = dict[str, Any]

# cluster-autoscaler core/scaleup/orchestrator/rejectedreasons.go AllOrNothingReason
ALL_OR_NOTHING_REASON = "not all pods would fit and scale-up is using all-or-nothing strategy"
POD_GROUP_MIN_MEMBER = "PodGroupMinMember"  # berthmaster's drain block reason (no upstream one)


@dataclass(frozen=True)
class Gang:
    key: str  # namespace/name of the PodGroup
    min_member: int
    running: int
    pod_group: Mapping[str, Any]


def _running(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and not (
        pod.get("metadata") or {}).get("deletionTimestamp") and (
        pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def gang_of(pod: Mapping[str, Any]) -> str:
    """``namespace/group`` of the pod's PodGroup label, "" for a pod of no group."""
    return full_name(dict(pod))


def gangs_of(pods: Iterable[Mapping[str, Any]], pod_groups: Iterable[Mapping[str, Any]]
             ) -> dict[str, Gang]:
    """Every PodGroup with its running members, by ``namespace/name``."""
    running = Counter(gang_of(p) for p in pods if _running(p))
    gangs = {}
    for group in pod_groups:
        meta = group.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        gangs[key] = Gang(key, min_member(group), running[key], group)
    return gangs


def with_pending_members(pending: Sequence[JSON], pods: Iterable[Mapping[str, Any]],
                         gangs: Mapping[str, Gang]) -> list[JSON]:
    """``pending`` plus the other unbound members of the gangs it holds pods of, so a gang is
    judged whole even before the scheduler has marked each member unschedulable."""
    def ref(pod: Mapping[str, Any]) -> tuple[str, str]:
        meta = pod.get("metadata") or {}
        return str(meta.get("namespace", "")), str(meta.get("name", ""))

    wanted = {gang_of(p) for p in pending} & set(gangs)
    seen = {ref(p) for p in pending}
    extra = [dict(p) for p in pods
             if gang_of(p) in wanted and ref(p) not in seen
             and not (p.get("spec") or {}).get("nodeName")
             and not (p.get("metadata") or {}).get("deletionTimestamp")]
    return [*pending, *sorted(extra, key=ref)]


def short_gangs(gangs: Mapping[str, Gang], placed: Iterable[Mapping[str, Any]]) -> set[str]:
    """The gangs among ``placed`` pods whose running members plus the placed ones stay below
    ``minMember``: a placement that cannot start them."""
    count = Counter(gang_of(p) for p in placed)
    return {key for key, n in count.items()
            if key in gangs and gangs[key].running + n < gangs[key].min_member}


class GangBudget:
    """Running members each gang may still lose (above ``minMember``) while a scale-down plan
    evicts pods, node after node. A pod counts once, even when the plan moves it again (from a
    node it was moved to in the simulation)."""

    def __init__(self, gangs: Mapping[str, Gang]):
        self._gangs = gangs
        self._left = {key: gang.running - gang.min_member for key, gang in gangs.items()}
        self._taken: frozenset[str] = frozenset()

    def save(self) -> tuple[dict[str, int], frozenset[str]]:
        return dict(self._left), self._taken

    def restore(self, saved: tuple[Mapping[str, int], frozenset[str]]) -> None:
        self._left, self._taken = dict(saved[0]), saved[1]

    def take(self, pod: Mapping[str, Any]) -> str | None:
        """Count ``pod``'s eviction; why it would strand its gang, if it would."""
        key = gang_of(pod)
        meta = pod.get("metadata") or {}
        ref = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if key not in self._gangs or ref in self._taken:
            return None
        if self._left[key] < 1:
            gang = self._gangs[key]
            return (f"evicting it would leave PodGroup {key} with fewer than its minMember "
                    f"{gang.min_member} running pods ({gang.running} running)")
        self._left[key] -= 1
        self._taken = self._taken | {ref}
        return None
