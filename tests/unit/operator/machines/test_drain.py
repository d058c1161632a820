"""Drain planning: what is evicted, what is left, how failures read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berthmaster.operator.machines.drain import (
    eviction_body,
    eviction_error,
    format_duration,
    node_is_unreachable,
    parse_duration,
    plan_drain,
)
from tests.unit.operator.machines.machine_builders import make_pod

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)


def test_plan_skips_daemonset_and_mirror_pods_and_evicts_the_rest() -> None:
    pods = [make_pod("web", owner_kind="ReplicaSet"), make_pod("agent", owner_kind="DaemonSet"),
            make_pod("static", owner_kind="Node", mirror=True), make_pod("bare", owner_kind=None),
            make_pod("job", owner_kind="Job")]
    plan = plan_drain(pods, unreachable=False, now=NOW)
    assert [p["metadata"]["name"] for p in plan.evict] == ["web", "bare", "job"]
    assert [(p["metadata"]["name"], why) for p, why in plan.ignored] == [
        ("agent", "DaemonSet-managed"), ("static", "mirror pod")]


def test_unreachable_node_stops_waiting_for_long_terminating_pods() -> None:
    stuck = make_pod("stuck", deleted_at="2026-01-01T00:00:00Z")
    fresh = make_pod("fresh", deleted_at="2026-01-01T00:00:10Z")
    assert [p["metadata"]["name"] for p in plan_drain([stuck, fresh], unreachable=True,
                                                      now=NOW).evict] == ["fresh"]
    assert len(plan_drain([stuck, fresh], unreachable=False, now=NOW).evict) == 2


def test_eviction_body_and_grace_on_unreachable_nodes() -> None:
    pod = make_pod("web")
    assert eviction_body(pod, unreachable=False) == {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "web", "namespace": "ns"}}
    assert eviction_body(pod, unreachable=True)["deleteOptions"] == {"gracePeriodSeconds": 1}
    assert eviction_error(pod, "Cannot evict pod as it would violate the pod's disruption "
                               "budget.") == ('error when evicting pods/"web" -n "ns": Cannot '
                                              "evict pod as it would violate the pod's "
                                              "disruption budget.")


def test_node_unreachable_is_ready_unknown() -> None:
    node = {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert node_is_unreachable(node)
    assert not node_is_unreachable({"status": {"conditions": [{"type": "Ready",
                                                              "status": "False"}]}})


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400),
                                               ("1.5m", 90), ("500ms", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5", "5 minutes", "m5", "-5m"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_format_duration_is_gos() -> None:
    assert [format_duration(timedelta(seconds=s)) for s in (45, 300, 5400)] == \
        ["45s", "5m0s", "1h30m0s"]
