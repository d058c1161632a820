"""The autoscaler's taint changes (utils/taints/taints.go: AddTaints, CleanTaints) and the
second drainability judgement of a node being removed (actuation/actuator.go,
deleteNodesAsync), pure."""

from __future__ import annotations

from typing import Any

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.loop import (
    Actuator,
    AutoscalerState,
    ProvisionRequest,
    build_status,
    handle_provision_timeouts,
)
from berthmaster.operator.autoscaler.scaledown import ScaleDownPlan, pods_to_drain
from berthmaster.operator.autoscaler.scaleup import ScaleUpDecision
from berthmaster.operator.autoscaler.taints import (
    DELETION_CANDIDATE_TAINT,
    TO_BE_DELETED_TAINT,
    with_taint,
    without_taints,
)
from tests.unit.autoscaler.builders import make_machine_set, make_pod

TAINT = {"key": TO_BE_DELETED_TAINT, "value": "1", "effect": "NoSchedule"}
OTHER = {"key": "example.com/x", "value": "", "effect": "NoSchedule"}


def tainted(*taints: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "spec": {"taints": list(taints)}}


def test_adding_keeps_other_taints_and_cordons_when_asked() -> None:
    assert with_taint(tainted(OTHER), TAINT, cordon=True) == {
        "taints": [OTHER, TAINT], "unschedulable": True}
    assert with_taint(tainted(OTHER), TAINT, cordon=False) == {"taints": [OTHER, TAINT]}


def test_nothing_to_write_when_present_or_absent() -> None:
    assert with_taint(tainted(TAINT), TAINT, cordon=True) is None
    assert without_taints(tainted(OTHER), [TO_BE_DELETED_TAINT], uncordon=True) is None


def test_removing_keeps_other_taints_and_uncordons_when_asked() -> None:
    soft = {"key": DELETION_CANDIDATE_TAINT, "value": "1", "effect": "PreferNoSchedule"}
    assert without_taints(tainted(OTHER, TAINT, soft), [TO_BE_DELETED_TAINT], True) == {
        "taints": [OTHER, soft], "unschedulable": False}


def test_a_pod_without_controller_blocks_the_removal() -> None:
    moved = make_pod("a", owner="ReplicaSet")
    bare = make_pod("b", owner=None)
    to_move, blocked = pods_to_drain([moved, bare], AutoscalerConfig(), [])
    assert to_move == [] and blocked is not None and blocked.reason == "NotReplicated"
    to_move, blocked = pods_to_drain([moved], AutoscalerConfig(), [])
    assert to_move == [moved] and blocked is None


def test_backoff_is_kept_on_the_monotonic_clock_and_written_as_wall_time() -> None:
    """A wall clock step changes nothing kept; the written stamp is wall time."""
    view = build_cluster_view([make_machine_set("g", namespace="ns")], [], [])
    state = AutoscalerState()
    state.backoff_until["ns/g"] = 1_000.0 + 300  # monotonic
    status = build_status(view, state, ScaleUpDecision(), ScaleDownPlan(), None, 0,
                          AutoscalerConfig(), now=1_700_000_000.0, clock=1_000.0)
    assert status["conditions"][1]["reason"] == "Backoff"
    later = build_status(view, state, ScaleUpDecision(), ScaleDownPlan(), None, 0,
                         AutoscalerConfig(), now=1_600_000_000.0, clock=1_301.0)
    assert later["conditions"][1]["reason"] != "Backoff"


async def test_a_request_of_a_group_that_is_gone_is_forgotten() -> None:
    """Nothing will arrive for a deleted MachineSet: its request must not keep ScaleUp
    InProgress for ever."""
    state = AutoscalerState()
    state.provisioning["ns/gone"] = ProvisionRequest(since=0.0, target=2)
    view = build_cluster_view([make_machine_set("here", namespace="ns")], [], [])
    act = Actuator(kube=None, now=1_700_000_000.0, clock=10.0)  # type: ignore[arg-type]
    assert await handle_provision_timeouts(act, view, state, AutoscalerConfig(), []) == []
    assert state.provisioning == {}
