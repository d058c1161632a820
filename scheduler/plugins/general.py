"""GeneralPredicates: HostName + MatchNodeSelector + PodFitsHostPorts + PodFitsResources.

The legacy predicate ran its four parts and reported every failing one at once. Since
kube-scheduler split it into filter plugins (NodeName, NodeAffinity, NodePorts,
NodeResourcesFit, in that order in the default profile of pkg/scheduler/apis/config/v1
default_plugins.go), a node is rejected by the first failing plugin alone and the
FailedScheduling message counts only that one's reasons; this predicate does the same, in the
same order, so ``Insufficient cpu`` is never reported beside ``didn't match Pod's node
affinity/selector`` for one node.
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import (
    Check,
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Status,
    narrowing,
    unwrap,
)
from berthmaster.scheduler.plugins.node_affinity import NodeAffinity
from berthmaster.scheduler.plugins.node_name import NodeName
from berthmaster.scheduler.plugins.node_ports import NodePorts
from berthmaster.scheduler.plugins.node_resources_fit import NodeResourcesFit
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "GeneralPredicates"
PARTS = (NodeName, NodeAffinity, NodePorts, NodeResourcesFit)


@dataclass
class GeneralPredicates(Predicate):
    NAME = NAME
    EVENTS = ("Pod/Delete", "Node/Add", "Node/UpdateNodeAllocatable", "Node/UpdateNodeLabel")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        checks: list[Check] = []
        for part in PARTS:
            result = part().prefilter(pod, snapshot)
            if isinstance(result, Status):
                return result
            if result is not None:
                checks.append(result)
        if not checks:
            return None
        if len(checks) == 1:
            return checks[0]
        # the parts' narrowing (only NodeAffinity declares one) carries over to the whole
        allowed = next((a for a in map(narrowing, checks) if a is not None), None)
        parts = [unwrap(c) for c in checks]

        def check(node: NodeInfo) -> Status | None:
            for c in parts:
                status = c(node)
                if status is not None:
                    return status
            return None

        return check if allowed is None else NarrowedCheck(check, allowed)
