"""PodFitsResources (kube-scheduler: NodeResourcesFit): requests fit the node's allocatable.

Requested, not used: the pod's requests (pod_resources.pod_requests: pod-level requests,
overhead, sidecars and init containers, and a bound pod's in-place resize at its larger end)
plus what the pods already counted on the node request must not exceed allocatable, for cpu,
memory, ephemeral-storage and every extended resource the pod asks for; and the node's pod
count must stay within ``pods``. Every shortfall is reported, one reason each (``Insufficient
cpu``, ``Too many pods``...). As kube-scheduler 1.35 (noderesources/fit.go, fitsRequest), a
request larger than the node's whole allocatable makes the rejection unresolvable: no
preemption on that node can make room. Pods nominated to a node by preemption count there for
every filter, this one included (the engine's ``_with_nominated``). A bound pod whose requests
go down (``Pod/UpdatePodScaleDown``) retries the pods this filter rejected that request what it
gave back (fit.go, isSchedulableAfterPodScaleDown).
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.scheduler.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "PodFitsResources"
ALIASES = ("NodeResourcesFit",)
REASON_TOO_MANY_PODS = "Too many pods"
REASON_INSUFFICIENT = "Insufficient %s"


def insufficient(pod: PodView, node: NodeInfo) -> list[str]:
    """Every reason ``pod`` does not fit ``node`` by resources (empty when it fits)."""
    out: list[str] = []
    if len(node.pods) + 1 > node.alloc_pods:
        out.append(REASON_TOO_MANY_PODS)
    for name, amount in pod.requests.items():
        if amount <= 0 or name == PODS:
            continue
        used = node.requested.get(name, 0)
        if amount > node.allocatable.get(name, 0) - used:
            out.append(REASON_INSUFFICIENT % name)
    return out


def exceeds_allocatable(pod: PodView, node: NodeInfo) -> bool:
    """Whether some request is larger than the node's whole allocatable (not even an empty
    node would hold it): upstream's ``InsufficientResource.Unresolvable``."""
    return any(amount > node.allocatable.get(name, 0)
               for name, amount in pod.requests.items() if amount > 0 and name != PODS)


def rejection(pod: PodView, node: NodeInfo) -> Status | None:
    """The node's status for ``pod`` (None: it fits)."""
    reasons = tuple(insufficient(pod, node))
    if not reasons:
        return None
    return Status(reasons, exceeds_allocatable(pod, node))


@dataclass
class NodeResourcesFit(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    # fit.go, EventsToRegister: with InPlacePodVerticalScaling (GA in 1.35) a pod that scales
    # down may make room too
    EVENTS = ("Pod/Delete", "Pod/UpdatePodScaleDown", "Node/Add", "Node/UpdateNodeAllocatable")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        req = pod.requests
        cpu = req.get(CPU, 0)
        mem = req.get(MEMORY, 0)
        eph = req.get(EPHEMERAL_STORAGE, 0)
        scalars = tuple((k, v) for k, v in req.items()
                        if v > 0 and k not in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS))
        statuses: dict[Status, Status] = {}

        def check(node: NodeInfo) -> Status | None:
            if (len(node.pods) < node.alloc_pods
                    and cpu <= node.alloc_cpu - node.req_cpu
                    and mem <= node.alloc_memory - node.req_memory
                    and eph <= node.alloc_ephemeral - node.req_ephemeral
                    and not scalars):
                return None
            status = rejection(pod, node)
            return None if status is None else statuses.setdefault(status, status)

        return check
