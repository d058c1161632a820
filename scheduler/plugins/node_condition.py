"""CheckNodeCondition and the legacy pressure predicates (memory, disk, PID).

CheckNodeCondition rejects nodes whose Ready condition is not True or whose NetworkUnavailable
condition is not False, and cordoned nodes. The pressure predicates reject nodes reporting the
pressure (a BestEffort pod is the only one CheckNodeMemoryPressure cares about, as upstream).
Nodes tainted by condition make these mostly redundant with PodToleratesNodeTaints; they are
kept for Policy files that name them.
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import (
    Predicate,
    PrefilterResult,
    Status,
    unresolvable,
    unresolvable_for,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "CheckNodeCondition"
ALIASES = ("NodeCondition",)
MEMORY_PRESSURE_NAME = "CheckNodeMemoryPressure"
DISK_PRESSURE_NAME = "CheckNodeDiskPressure"
PID_PRESSURE_NAME = "CheckNodePIDPressure"
REASON_NOT_READY = "node(s) were not ready"
REASON_NETWORK_UNAVAILABLE = "node(s) had unavailable network"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_MEMORY_PRESSURE = "node(s) had memory pressure"
REASON_DISK_PRESSURE = "node(s) had disk pressure"
REASON_PID_PRESSURE = "node(s) had pid pressure"


def condition_reasons(node: NodeInfo) -> tuple[str, ...]:
    out = []
    conditions = node.view.conditions
    if "Ready" in conditions and conditions["Ready"] != "True":
        out.append(REASON_NOT_READY)
    if "NetworkUnavailable" in conditions and conditions["NetworkUnavailable"] != "False":
        out.append(REASON_NETWORK_UNAVAILABLE)
    if node.view.unschedulable:
        out.append(REASON_UNSCHEDULABLE)
    return tuple(out)


@dataclass
class NodeCondition(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add", "Node/UpdateNodeCondition")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        return unresolvable_for(condition_reasons)


def _is_best_effort(pod: PodView) -> bool:
    spec = pod.raw.get("spec") or {}
    pod_level = spec.get("resources")
    if pod_level is not None:
        # pkg/apis/core/v1/helper/qos/qos.go, ComputePodQOS: pod-level resources, when the pod
        # has them, decide the class alone
        return not (pod_level.get("requests") or pod_level.get("limits"))
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        res = c.get("resources") or {}
        if res.get("requests") or res.get("limits"):
            return False
    return True


@dataclass
class _Pressure(Predicate):
    CONDITION = ""
    FAIL = unresolvable("")
    BEST_EFFORT_ONLY = False

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if self.BEST_EFFORT_ONLY and not _is_best_effort(pod):
            return None
        condition, fail = self.CONDITION, self.FAIL

        def check(node: NodeInfo) -> Status | None:
            return fail if node.view.conditions.get(condition) == "True" else None

        return check


@dataclass
class MemoryPressure(_Pressure):
    NAME = MEMORY_PRESSURE_NAME
    CONDITION = "MemoryPressure"
    FAIL = unresolvable(REASON_MEMORY_PRESSURE)
    BEST_EFFORT_ONLY = True


@dataclass
class DiskPressure(_Pressure):
    NAME = DISK_PRESSURE_NAME
    CONDITION = "DiskPressure"
    FAIL = unresolvable(REASON_DISK_PRESSURE)


@dataclass
class PIDPressure(_Pressure):
    NAME = PID_PRESSURE_NAME
    CONDITION = "PIDPressure"
    FAIL = unresolvable(REASON_PID_PRESSURE)
