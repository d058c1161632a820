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
    next_backoff,
    unsafe_to_autoscale,
)
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.loop import (
    Actuator,
    AutoscalerState,
    ProvisionRequest,
    handle_provision_timeouts,
)
from tests.unit.autoscaler.builders import make_machine, make_machine_set, make_node


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


def test_node_group_backoff_doubles_caps_and_resets_after_three_hours() -> None:
    """cluster-autoscaler utils/backoff/exponential_backoff.go ``Backoff`` and
    ``RemoveStaleBackoffData`` with config/flags/flags.go's defaults: 5 min first, doubled on a
    failure after the backoff ended, at most 30 min, unchanged by a failure while still backed
    off, and forgotten 3 h after the last failure."""
    minute = 60.0
    length, until = next_backoff(None, None, None, 0.0)
    assert (length, until) == (5 * minute, 5 * minute)
    failures = [0.0]
    for expected in (10, 20, 30, 30):
        now = until + 1
        length, until = next_backoff(length, until, failures[-1], now)
        failures.append(now)
        assert length == expected * minute
    # a second failure while still backed off: same length, from now
    length, until = next_backoff(length, until, failures[-1], until - 1)
    assert length == 30 * minute
    # three hours after the last failure, the next one starts again at 5 min
    last = until - 1
    assert next_backoff(length, until, last, last + 3 * 60 * minute + 1)[0] == 5 * minute
    assert next_backoff(length, until, last, last + 3 * 60 * minute - 1)[0] == 30 * minute


async def test_a_finished_scale_up_clears_the_group_backoff() -> None:
    """cluster-autoscaler clusterstate/clusterstate.go ``updateScaleRequests``: when no node of
    the request is still to come, the scale-up finished and the group's backoff is removed,
    so its next failure backs off 5 min again."""
    view = build_cluster_view([make_machine_set("g", 1, namespace="ns")],
                              [make_machine("m", "g", "n", namespace="ns")], [make_node("n")])
    state = AutoscalerState()
    state.provisioning["ns/g"] = ProvisionRequest(since=0.0, target=1)
    state.backoff_length["ns/g"] = 30 * 60.0
    state.backoff_until["ns/g"] = 5.0
    state.backoff_last_failure["ns/g"] = 1.0
    act = Actuator(kube=None, now=1_700_000_000.0, clock=10.0)  # type: ignore[arg-type]
    assert await handle_provision_timeouts(act, view, state, AutoscalerConfig(), []) == []
    assert (state.provisioning, state.backoff_length, state.backoff_until,
            state.backoff_last_failure) == ({}, {}, {}, {})
