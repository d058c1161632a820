"""The pass summary table and the exit code."""

from __future__ import annotations

from collections import Counter

from berthmaster.scheduler.descheduler.context import Tally
from berthmaster.scheduler.descheduler.summary import (
    EXIT_OK,
    EXIT_STRATEGY_FAILED,
    exit_code,
    render,
)


def test_table_rows_reasons_and_total() -> None:
    tallies = [
        Tally("PodLifeTime", "p", considered=10, evicted=["ns/a", "ns/b"],
              skipped=Counter({"pod is a mirror pod": 1,
                               "eviction refused (429 Too Many Requests): budget": 2})),
        Tally("LowNodeUtilization", "p", considered=10, note="all nodes are underutilized"),
    ]
    text = render(tallies, dry_run=False)
    lines = text.splitlines()
    assert lines[0].split() == ["strategy", "profile", "considered", "evicted", "skipped"]
    assert lines[1].split() == ["PodLifeTime", "p", "10", "2", "3"]
    assert "    2 x eviction refused (429 Too Many Requests): budget" in lines
    assert "    note: all nodes are underutilized" in lines
    assert lines[-1] == "total: evicted 2 pod(s)"
    assert "would evict" in render(tallies, dry_run=True)
    assert exit_code(tallies) == EXIT_OK
    assert exit_code([Tally("X", failure="LookupError: no class")]) == EXIT_STRATEGY_FAILED
