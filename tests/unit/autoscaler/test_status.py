"""The ClusterAutoscaler status: conditions keep their transition time while unchanged."""

from __future__ import annotations

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.handlers import status_changes
from berthmaster.operator.autoscaler.loop import AutoscalerState, build_status
from berthmaster.operator.autoscaler.scaledown import ScaleDownPlan, Unneeded
from berthmaster.operator.autoscaler.scaleup import GroupIncrease, ScaleUpDecision
from tests.unit.autoscaler.builders import make_machine_set


def test_conditions_and_transition_times() -> None:
    view = build_cluster_view([make_machine_set("w", 1)], [], [])
    state = AutoscalerState()
    decision = ScaleUpDecision(increases=(GroupIncrease("machines/w", 1, 3, 5),))
    plan = ScaleDownPlan(unneeded=(Unneeded("n1", "machines/w", 0.1, ()),),
                         unremovable={"n2": "BlockedByPod", "cp": "NotAutoscaled"},
                         messages={"n2": "NotReplicated: ns/p is not replicated"})
    first = build_status(view, state, decision, plan, None, 2, AutoscalerConfig(), now=1000.0)
    conditions = {c["type"]: c for c in first["conditions"]}
    assert conditions["ScaleUp"]["reason"] == "InProgress"
    assert "{MachineSet/machines/w 1->3 (max: 5)}" in conditions["ScaleUp"]["message"]
    assert conditions["ScaleDown"]["reason"] == "CandidatesPresent"
    assert first["unremovableNodes"] == [{"name": "n2", "reason": "BlockedByPod",
                                          "message": "NotReplicated: ns/p is not replicated"}]
    assert first["nodeGroups"][0] == {"name": "machines/w", "minSize": 0, "maxSize": 5,
                                      "targetSize": 1, "registered": 0}

    later = build_status(view, state, decision, ScaleDownPlan(), None, 0, AutoscalerConfig(),
                         now=2000.0, previous=first["conditions"])
    again = {c["type"]: c for c in later["conditions"]}
    assert again["ScaleUp"]["lastTransitionTime"] == conditions["ScaleUp"]["lastTransitionTime"]
    assert again["ScaleDown"]["reason"] == "NoCandidates"
    assert again["ScaleDown"]["lastTransitionTime"] != conditions["ScaleDown"]["lastTransitionTime"]


@pytest.mark.parametrize(("current", "wanted", "written"), [
    # a loop at rest: nothing changed, nothing written (no PATCH every scan interval)
    ({"unneededNodes": 0, "conditions": [{"type": "Healthy", "status": "True"}]},
     {"unneededNodes": 0, "conditions": [{"type": "Healthy", "status": "True"}]}, {}),
    ({"unneededNodes": 0, "observedGeneration": 1},
     {"unneededNodes": 2, "observedGeneration": 1}, {"unneededNodes": 2}),
    ({}, {"unschedulablePods": 0}, {"unschedulablePods": 0}),
    ({"nodeGroups": [{"name": "a", "targetSize": 1}]},
     {"nodeGroups": [{"name": "a", "targetSize": 2}]},
     {"nodeGroups": [{"name": "a", "targetSize": 2}]}),
])
def test_only_changed_status_fields_are_written(current: dict, wanted: dict,
                                                written: dict) -> None:
    assert status_changes(current, wanted) == written
