"""The configurable ``labelsPresence`` predicate and ``labelPreference`` priority.

labelsPresence (CheckNodeLabelPresence): with ``presence: true`` a node must carry every listed
label (any value); with ``presence: false`` it must carry none of them. labelPreference: a node
scores 100 when its having the label agrees with ``presence``, else 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import (
    MAX_PRIORITY,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    unresolvable,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "CheckNodeLabelPresence"
ALIASES = ("NodeLabel",)
ARGUMENT = "labelsPresence"
PRIORITY_NAME = "NodeLabelPriority"
PRIORITY_ARGUMENT = "labelPreference"
REASON = "node(s) didn't have the requested labels"
_FAIL = unresolvable(REASON)


def has_required_labels(labels: dict[str, str], wanted: Sequence[str], presence: bool) -> bool:
    if presence:
        return all(k in labels for k in wanted)
    return not any(k in labels for k in wanted)


@dataclass
class LabelsPresence(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add", "Node/UpdateNodeLabel")
    labels: list[str] = field(default_factory=list)
    presence: bool = True

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        if not self.labels:
            return None
        wanted, presence = tuple(self.labels), self.presence

        def check(node: NodeInfo) -> Status | None:
            return None if has_required_labels(node.labels, wanted, presence) else _FAIL

        return check


@dataclass
class LabelPreference(Priority):
    NAME = PRIORITY_NAME
    label: str = ""
    presence: bool = True

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        label, presence = self.label, self.presence
        return [MAX_PRIORITY if (label in n.labels) == presence else 0 for n in nodes]
