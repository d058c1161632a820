"""HostName (kube-scheduler: NodeName): a pod naming a node in ``spec.nodeName`` fits only it.

Pods the scheduler sees normally have no nodeName; the check matters for the descheduler and
the autoscaler asking "would this pod fit there".
"""

from __future__ import annotations

from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status, unresolvable
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "HostName"
ALIASES = ("PodFitsHost", "NodeName")
REASON = "node(s) didn't match the requested node name"
_FAIL = unresolvable(REASON)


def fits(pod: PodView, node: NodeInfo) -> bool:
    return not pod.node_name or pod.node_name == node.name


@dataclass
class NodeName(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add",)

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if not pod.node_name:
            return None
        wanted = pod.node_name

        def check(node: NodeInfo) -> Status | None:
            return None if node.name == wanted else _FAIL

        return check
