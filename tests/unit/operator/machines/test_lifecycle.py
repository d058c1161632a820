"""The deletion state machine: each recorded state leads to exactly the next step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berthmaster.operator.machines.lifecycle import (
    Step,
    decide_deletion_step,
    drain_timed_out,
    drain_timeout,
)
from tests.unit.operator.machines.machine_builders import make_machine

STARTED = {"startedAt": "2026-01-02T00:00:00Z"}
DRAINED = [{"type": "Drained", "status": "True"}]


@pytest.mark.parametrize(("machine", "step"), [
    (make_machine(deleting=True, finalizer=False), Step.NOTHING),
    (make_machine(deleting=True, phase="Running", node="n"), Step.MARK_DELETING),
    (make_machine(deleting=True, phase="Deleting", node="n"), Step.MARK_DELETING),
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  pre_drain=[("A", "own")], pre_terminate=[("B", "own")]), Step.WAIT_PRE_DRAIN),
    # Upstream's drain controller (machine-api-operator pkg/controller/machine/
    # drain_controller.go Reconcile) skips the drain, and with it the preDrain hooks, for a
    # Machine excluded from draining or without a nodeRef.
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  pre_drain=[("A", "own")],
                  annotations={"machine.openshift.io/exclude-node-draining": ""}),
     Step.SKIP_DRAIN),
    (make_machine(deleting=True, phase="Deleting", node=None, progress=STARTED,
                  pre_drain=[("A", "own")]), Step.SKIP_DRAIN),
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  pre_terminate=[("B", "own")]), Step.DRAIN),
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  conditions=[{"type": "Drained", "status": "False", "reason": "DrainError"}]),
     Step.DRAIN),
    (make_machine(deleting=True, phase="Deleting", node=None, progress=STARTED), Step.SKIP_DRAIN),
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  annotations={"machine.openshift.io/exclude-node-draining": ""}),
     Step.SKIP_DRAIN),
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  conditions=DRAINED, pre_terminate=[("B", "own")]), Step.WAIT_PRE_TERMINATE),
    (make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                  conditions=DRAINED), Step.DELETE_INSTANCE),
    (make_machine(deleting=True, phase="Deleting", node="n", conditions=DRAINED,
                  progress={**STARTED, "instanceDeletedAt": "t"}), Step.WAIT_INSTANCE_GONE),
    (make_machine(deleting=True, phase="Deleting", node="n", conditions=DRAINED,
                  progress={**STARTED, "instanceDeletedAt": "t", "instanceGoneAt": "t"}),
     Step.DELETE_NODE),
    (make_machine(deleting=True, phase="Deleting", node=None, conditions=DRAINED,
                  progress={**STARTED, "instanceDeletedAt": "t", "instanceGoneAt": "t"}),
     Step.REMOVE_FINALIZER),
    (make_machine(deleting=True, phase="Deleting", node="n", conditions=DRAINED,
                  progress={**STARTED, "instanceDeletedAt": "t", "instanceGoneAt": "t",
                            "nodeDeletedAt": "t"}), Step.REMOVE_FINALIZER),
    # the Node the nodeRef named was not the Machine's: left alone, deletion goes on
    (make_machine(deleting=True, phase="Deleting", node="n", conditions=DRAINED,
                  progress={**STARTED, "instanceDeletedAt": "t", "instanceGoneAt": "t",
                            "nodeNotOwnedAt": "t"}), Step.REMOVE_FINALIZER),
])
def test_next_step(machine: dict, step: Step) -> None:
    assert decide_deletion_step(machine) is step


def test_hooks_added_after_drain_do_not_undo_it() -> None:
    machine = make_machine(deleting=True, phase="Deleting", node="n", progress=STARTED,
                           conditions=DRAINED, pre_drain=[("Late", "someone")])
    assert decide_deletion_step(machine) is Step.DELETE_INSTANCE


def test_drain_timeout_annotations() -> None:
    assert drain_timeout(make_machine()) is None
    timeout = drain_timeout(make_machine(annotations={"berthmaster.io/drain-timeout": "1m30s"}))
    assert timeout is not None and timeout.limit == timedelta(seconds=90)
    assert not timeout.proceed and timeout.text == "1m30s"
    opted = drain_timeout(make_machine(annotations={
        "berthmaster.io/drain-timeout": "5m",
        "berthmaster.io/proceed-after-drain-timeout": "true"}))
    assert opted is not None and opted.proceed
    with pytest.raises(ValueError, match=r"Machine m: annotation berthmaster.io/drain-timeout: "
                                         "'soon' is not a duration; use .* 90s, 5m or 1h30m"):
        drain_timeout(make_machine(annotations={"berthmaster.io/drain-timeout": "soon"}))


def test_drain_timed_out_counts_from_first_attempt() -> None:
    machine = make_machine(progress={"drainStartedAt": "2026-01-02T00:00:00Z"})
    timeout = drain_timeout(make_machine(annotations={"berthmaster.io/drain-timeout": "60s"}))
    assert timeout is not None
    start = datetime(2026, 1, 2, tzinfo=UTC)
    assert not drain_timed_out(machine, timeout, start + timedelta(seconds=59))
    assert drain_timed_out(machine, timeout, start + timedelta(seconds=60))
    assert not drain_timed_out(make_machine(), timeout, start + timedelta(days=1))
