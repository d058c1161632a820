"""EqualPriority: every node scores 1 (ties everywhere, broken at random). For tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Priority
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "EqualPriority"


@dataclass
class Equal(Priority):
    NAME = NAME

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        return 1
