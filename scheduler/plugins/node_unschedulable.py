"""CheckNodeUnschedulable (kube-scheduler: NodeUnschedulable).

A cordoned node (``spec.unschedulable``) takes no new pods unless the pod tolerates the
``node.kubernetes.io/unschedulable:NoSchedule`` taint. The engine always runs it, as upstream
made it mandatory once nodes were tainted by condition.
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.scheduler.model import PodView, Taint
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unresolvable
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "CheckNodeUnschedulable"
ALIASES = ("NodeUnschedulable",)
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
_FAIL = unresolvable(REASON)


def tolerates_unschedulable(pod: PodView) -> bool:
    return any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations)


@dataclass
class NodeUnschedulable(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add", "Node/UpdateNodeTaint")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if not snapshot.unschedulable_nodes or tolerates_unschedulable(pod):
            return None
        cordoned = snapshot.unschedulable_nodes

        def check(node: NodeInfo) -> Status | None:
            return _FAIL if node.name in cordoned else None

        return check
