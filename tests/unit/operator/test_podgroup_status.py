"""A PodGroup's status from its pods, as scheduler-plugins' PodGroup controller decides it
(kubernetes-sigs/scheduler-plugins pkg/controllers/podgroup_controller.go: Reconcile's phase
steps, getCurrentPodStats, fillOccupiedObj); ``scheduled`` and the ``Scheduled`` phase are
berthmaster's (bound pods)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.podgroups.status import decide_status, occupied_by, settle


def group(min_member: int = 2, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": min_member},
            "status": status}


def pod(phase: str = "Pending", node: str | None = None, owner: str | None = "job-a"
        ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ml"}
    if owner:
        meta["ownerReferences"] = [{"name": owner, "kind": "Job"}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("before", "pods", "phase"), [
    ({}, [], "Pending"),
    ({"phase": "Pending"}, [pod()], "Pending"),  # fewer pods than minMember
    ({"phase": "Pending"}, [pod(), pod()], "Scheduling"),
    ({"phase": "Scheduling"}, [pod(node="a"), pod()], "Scheduling"),
    ({"phase": "Scheduling"}, [pod(node="a"), pod(node="b")], "Scheduled"),
    ({"phase": "Scheduled"}, [pod("Running", "a"), pod("Running", "b")], "Running"),
    ({"phase": "Running"}, [pod("Running", "a")], "Pending"),  # a member went away
    ({"phase": "Running"}, [pod("Failed", "a"), pod("Running", "b")], "Failed"),
    ({"phase": "Running"}, [pod("Succeeded", "a"), pod("Succeeded", "b")], "Finished"),
    ({"phase": "Finished"}, [pod(), pod()], "Finished"),  # final
])
def test_one_reconcile_step(before: dict[str, Any], pods: list[dict[str, Any]],
                            phase: str) -> None:
    assert decide_status(group(**before), pods)["phase"] == phase


def test_counts_and_occupied_by() -> None:
    pods = [pod("Running", "a"), pod("Succeeded", "b"), pod("Failed", "c")]
    status = settle(group(min_member=6), [pod(owner="b-job"), *pods, pod(node="d")])
    assert status["phase"] == "Pending"
    status = settle(group(min_member=3), [pod(owner="z"), *pods])
    assert (status["running"], status["succeeded"], status["failed"],
            status["scheduled"]) == (1, 1, 1, 3)
    assert status["occupiedBy"] == "ml/z"
    assert status["phase"] == "Failed"
    assert occupied_by(pod(owner=None)) is None


def test_settle_takes_every_step_at_once() -> None:
    status = settle(group(), [pod("Running", "a"), pod("Running", "b")])
    assert status["phase"] == "Running"
