"""BenchTrivial: the cheapest out-of-tree Filter and Score, to measure what the plugin API costs.

bench/bench_scheduler.py's ``berthmaster-plugin`` run enables it beside the default profile;
the difference from the ``berthmaster`` run (the default profile alone) is the price of the
out-of-tree path per pod: the entry point's containment wrappers (scheduler/plugins/
out_of_tree.py), one PreFilter call, one Filter call per feasible node and one Score call a cycle.

The Filter never skips at PreFilter (a Skip would leave the per-node calls, the cost to measure,
out) and passes every node. The Score reads one node label no bench node carries, so every node
scores 0 and the placement is the default profile's.

Found the way an installed package is: ``bench/trivial_plugin`` holds a ``*.dist-info``
directory whose ``entry_points.txt`` declares it in the ``berthmaster.plugins`` group
(docs/plugins.md, Packaging); the bench puts that directory on the scheduler's ``PYTHONPATH``,
so nothing is installed into the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from berthmaster.scheduler import framework

NAME = "BenchTrivial"
LABEL = "bench.berthmaster.io/preferred"  # carried by no bench node: every score is 0


def _pass(node: framework.NodeInfo) -> framework.Status | None:
    return None


@dataclass
class BenchTrivialFilter(framework.Predicate):
    NAME: ClassVar[str] = NAME

    def prefilter(self, pod: framework.PodView, snapshot: framework.Snapshot
                  ) -> framework.PrefilterResult:
        return _pass  # never a Skip: the per-node call runs for every pod and node


@dataclass
class BenchTrivialScore(framework.Priority):
    NAME: ClassVar[str] = NAME

    def scores(self, pod: framework.PodView, snapshot: framework.Snapshot,
               nodes: Sequence[framework.NodeInfo]) -> list[int] | int:
        return [100 if LABEL in n.labels else 0 for n in nodes]


PLUGIN = framework.plugin(filter=BenchTrivialFilter, score=BenchTrivialScore)
