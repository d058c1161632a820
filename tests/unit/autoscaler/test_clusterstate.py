"""Whether the cluster is safe to autoscale (``cluster_autoscaler_cluster_safe_to_autoscale``).

Upstream: cluster-autoscaler clusterstate/clusterstate.go ``IsClusterHealthy`` (more unready
nodes than ``OkTotalUnreadyCount`` 3 and than ``MaxTotalUnreadyPercentage`` 45 % of all nodes),
and core/static_autoscaler.go ``RunOnce``; ``actOnEmptyCluster`` (no node, or no ready node)
acts only when ``--scale-up-from-zero`` is off, and it defaults to true. Before this change the
gauge was always 1.
"""

from __future__ import annotations

import pytest

from berthmaster.operator.autoscaler import metrics
from berthmaster.operator.autoscaler.clusterstate import (
    UNHEALTHY,
    unsafe_to_autoscale,
)


@pytest.mark.parametrize(("total", "ready", "unready", "expected"), [  # ready: for the reader
    (0, 0, 0, None),                    # an empty cluster scales up from zero
    (2, 0, 2, None),                    # 2 unready: within the count allowed
    (3, 0, 0, None),                    # all still starting: none counted unready
    (4, 0, 4, UNHEALTHY),               # none ready and 4 > 3 unready
    (10, 7, 3, None),                   # 3 unready: within the count allowed whatever the share
    (5, 1, 4, UNHEALTHY),               # 4 > 3 and 4 > 45 % of 5
    (10, 6, 4, None),                   # 4 > 3 but 4 <= 4.5 (45 % of 10)
    (10, 5, 5, UNHEALTHY),              # 5 > 4.5
    (100, 56, 44, None),                # 44 <= 45
    (100, 54, 46, UNHEALTHY),
    (1, 1, 0, None),
])
def test_unsafe_to_autoscale(total: int, ready: int, unready: int, expected: str | None) -> None:
    assert unsafe_to_autoscale(total, unready) == expected


@pytest.mark.parametrize(("safe", "value"), [(True, 1.0), (False, 0.0)])
def test_the_gauge_follows_the_decision(safe: bool, value: float) -> None:
    metrics.record_loop(metrics.LoopFigures(safe_to_autoscale=safe), now=0.0)
    assert metrics.cluster_safe_to_autoscale._value.get() == value
