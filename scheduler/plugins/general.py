"""GeneralPredicates: PodFitsResources + HostName + PodFitsHostPorts + MatchNodeSelector.

Runs the four checks on each node and reports every failing reason at once, as the legacy
predicate did. A node failing any unresolvable part (selector, name) is unresolvable for
preemption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, PrefilterResult, Status
from berthmaster.scheduler.plugins.node_affinity import NodeAffinity
from berthmaster.scheduler.plugins.node_name import NodeName
from berthmaster.scheduler.plugins.node_ports import NodePorts
from berthmaster.scheduler.plugins.node_resources_fit import NodeResourcesFit
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "GeneralPredicates"
PARTS = (NodeResourcesFit, NodeName, NodePorts, NodeAffinity)


@dataclass
class GeneralPredicates(Predicate):
    NAME = NAME
    EVENTS = ("Pod/Delete", "Node/Add", "Node/UpdateNodeAllocatable", "Node/UpdateNodeLabel")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        checks: list[Callable[[NodeInfo], Status | None]] = []
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
        combined: dict[tuple[Status, ...], Status] = {}

        def check(node: NodeInfo) -> Status | None:
            first = None
            more: list[Status] = []
            for c in checks:
                s = c(node)
                if s is not None:
                    if first is None:
                        first = s
                    else:
                        more.append(s)
            if first is None or not more:
                return first
            failed = (first, *more)
            status = combined.get(failed)
            if status is None:
                reasons = tuple(r for s in failed for r in s.reasons)
                status = combined[failed] = Status(reasons, any(s.unresolvable for s in failed))
            return status

        for c in checks:
            narrowing = getattr(c, "allowed", None)
            if narrowing is not None:
                check.allowed = narrowing  # type: ignore[attr-defined]
        return check
