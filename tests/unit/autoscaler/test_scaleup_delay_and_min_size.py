"""Scale-up timing and floors: ``scaleUp.newPodScaleUpDelay`` and ``enforceNodeGroupMinSize``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import (
    AutoscalerConfig,
    ResourceLimits,
    ResourceRange,
)
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.scaleup import (
    POD_SCALE_UP_DELAY_KEY,
    decide_min_size_scale_up,
    old_enough,
)
from tests.unit.autoscaler.builders import make_machine_set, make_node, make_pod

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def created(seconds_ago: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod = make_pod("p", unschedulable=True, annotations=annotations)
    stamp = datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod["metadata"]["creationTimestamp"] = stamp
    return pod


@pytest.mark.parametrize(("age", "delay", "annotation", "counts"), [
    (5, 0.0, None, True),  # the default: every pending pod counts at once
    (5, 10.0, None, False),  # younger than newPodScaleUpDelay: left to the scheduler
    (10, 10.0, None, False),  # upstream counts a pod only once it is *older* than the delay
    (11, 10.0, None, True),
    (30, 10.0, "1m", False),  # the annotation lengthens the delay for this pod
    (61, 10.0, "1m", True),
    (30, 60.0, "10s", False),  # ...but cannot shorten it (upstream logs and ignores it)
    (30, 10.0, "soon", True),  # an unparsable annotation is ignored
])
def test_young_pods_wait_for_their_scale_up_delay(age: int, delay: float, annotation: str | None,
                                                  counts: bool) -> None:
    """cluster-autoscaler core/static_autoscaler.go ``filterOutYoungPods``: a pending pod
    causes a scale-up only when older than --new-pod-scale-up-delay (OpenShift's
    ``scaleUp.newPodScaleUpDelay``) or its longer ``pod-scale-up-delay`` annotation."""
    annotations = {POD_SCALE_UP_DELAY_KEY: annotation} if annotation else None
    pod = created(age, annotations)
    assert (old_enough([pod], NOW, delay) == [pod]) is counts


def test_a_pod_without_creation_time_counts() -> None:
    pod = make_pod("p", unschedulable=True)
    assert old_enough([pod], NOW, 600.0) == [pod]


CONTROL_PLANE = [make_node("control-plane-0")]


def raise_to_min(machine_sets: list[dict[str, Any]], config: AutoscalerConfig | None = None,
                 backoff: tuple[str, ...] = ()) -> list[tuple[str, int, int]]:
    config = config or AutoscalerConfig(enforce_node_group_min_size=True)
    view = build_cluster_view(machine_sets, [], CONTROL_PLANE)
    upcoming = [(g.template, g.upcoming) for g in view.groups if g.template is not None]
    totals = cluster_totals(CONTROL_PLANE, config.limits, upcoming)
    return [(i.group_id, i.current, i.new)
            for i in decide_min_size_scale_up(view, config, totals, backoff)]


def test_groups_below_their_min_size_are_raised_to_it() -> None:
    """cluster-autoscaler core/scaleup/orchestrator ``ScaleUpToNodeGroupMinSize`` (run by
    core/static_autoscaler.go ``RunOnce`` when --enforce-node-group-min-size is set, which
    OpenShift's ``enforceNodeGroupMinSize: Enabled`` passes)."""
    sets = [make_machine_set("short", 0, min_size=2), make_machine_set("fine", 3, min_size=2),
            make_machine_set("none", 0, min_size=0)]
    assert raise_to_min(sets) == [("machines/short", 0, 2)]


def test_min_size_raise_skips_backoff_and_respects_the_cluster_limits() -> None:
    sets = [make_machine_set("a", 0, min_size=3), make_machine_set("b", 0, min_size=3)]
    assert raise_to_min(sets, backoff=("machines/a",)) == [("machines/b", 0, 3)]
    # 4 cores on the control plane; 4-core workers; at most 16 cores: room for three more nodes
    limited = AutoscalerConfig(enforce_node_group_min_size=True,
                               limits=ResourceLimits(cores=ResourceRange(0, 16)))
    assert raise_to_min(sets, limited) == [("machines/a", 0, 3)]
