"""``descheduler_pods_evicted_total``: a pass's counts travel to the operator in its
termination message (scheduler/descheduler/metrics.py, operator/deschedulers/evictions.py).

Upstream: kubernetes-sigs/descheduler metrics/metrics.go ``PodsEvictedTotal`` (labels result,
strategy, profile, namespace, node; ``error`` when a pod could not be evicted) and
pkg/descheduler/evictions/evictions.go ``EvictPod`` (success and error counted).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from berthmaster.operator.deschedulers.evictions import finished_at, reported_by
from berthmaster.scheduler.descheduler.metrics import (
    MESSAGE_LIMIT,
    parse_termination_message,
    termination_message,
)

A = ("success", "RemoveDuplicates", "p", "ns", "n1")
B = ("error", "LowNodeUtilization", "p", "ns", "n2")


def test_round_trip() -> None:
    message = termination_message({A: 3, B: 1})
    assert json.loads(message) == {"podsEvicted": [[*A, 3], [*B, 1]]}
    assert parse_termination_message(message) == {A: 3, B: 1}


def test_a_long_report_keeps_the_largest_counts_within_the_kubelets_limit() -> None:
    many = {("success", "S", "p", f"namespace-{i:04d}", f"node-{i:04d}"): i + 1
            for i in range(400)}
    message = termination_message(many)
    assert len(message.encode()) <= MESSAGE_LIMIT
    kept = parse_termination_message(message)
    assert 0 < len(kept) < len(many)
    assert min(kept.values()) >= max(n for k, n in many.items() if k not in kept)


@pytest.mark.parametrize("message", [
    None, "", "panic: boom", "[1]", '{"podsEvicted": 3}', '{"podsEvicted": [["a", 1]]}',
    '{"podsEvicted": [["a","b","c","d","e",-1]]}', '{"podsEvicted": [["a","b","c","d",5,1]]}',
])
def test_anything_else_reports_nothing(message: str | None) -> None:
    assert parse_termination_message(message) == {}


def pod(*messages: str | None) -> dict[str, Any]:
    return {"status": {"containerStatuses": [
        {"state": {"terminated": {"message": m}} if m is not None else {"running": {}}}
        for m in messages]}}


def test_reported_by_sums_the_pods() -> None:
    one = termination_message({A: 2})
    assert reported_by([pod(one), pod(one, None), pod("garbage")]) == {A: 4}


@pytest.mark.parametrize(("status", "expected"), [
    ({"completionTime": "2026-11-23T12:00:00Z"}, 1795435200.0),
    ({"conditions": [{"type": "Failed", "status": "True",
                      "lastTransitionTime": "2026-11-23T12:00:00Z"}]}, 1795435200.0),
    ({"active": 1}, None),
])
def test_finished_at(status: dict[str, Any], expected: float | None) -> None:
    assert finished_at({"status": status}) == expected
