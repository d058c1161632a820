"""Machine API conditions: when lastTransitionTime moves, and the order of the list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from berthmaster.operator.machines.conditions import (
    false_condition,
    set_condition,
    true_condition,
    unknown_condition,
)

BEFORE = "2026-01-01T00:00:00Z"
NOW = datetime(2026, 1, 2, tzinfo=UTC)
LATER = "2026-01-02T00:00:00Z"
DRAIN_ERROR = false_condition("Drained", "DrainError", "could not drain machine: a")


@pytest.mark.parametrize(("new", "transition"), [
    (DRAIN_ERROR, BEFORE),                                                    # same state
    (false_condition("Drained", "DrainError", "could not drain machine: b"), LATER),  # message
    (false_condition("Drained", "DrainTimeout", "could not drain machine: a"), LATER),  # reason
    (false_condition("Drained", "DrainError", "could not drain machine: a", "Info"), LATER),
    (true_condition("Drained", "Drain finished successfully"), LATER),        # status
    (unknown_condition("Drained", "DrainError", "could not drain machine: a"), LATER),
])
def test_transition_time_moves_when_any_part_of_the_state_changes(
        new: dict[str, Any], transition: str) -> None:
    """openshift/machine-api-operator pkg/util/conditions/gettersetter.go, Set and
    hasSameState: lastTransitionTime is renewed when status, reason, severity or message
    changes, and kept otherwise."""
    existing = [{**DRAIN_ERROR, "lastTransitionTime": BEFORE}]
    assert set_condition(existing, new, NOW) == [{**new, "lastTransitionTime": transition}]


def test_conditions_are_sorted_by_type() -> None:
    """gettersetter.go Set / lexicographicLess: the list is sorted by type after each Set."""
    conditions = set_condition([], true_condition("Terminable"), NOW)
    conditions = set_condition(conditions, true_condition("InstanceExists"), NOW)
    conditions = set_condition(conditions, true_condition("Drainable"), NOW)
    assert [c["type"] for c in conditions] == ["Drainable", "InstanceExists", "Terminable"]


def test_unknown_condition_has_no_severity() -> None:
    """gettersetter.go UnknownCondition: type, status Unknown, reason, message."""
    assert unknown_condition("InstanceExists", "ErrorCheckingProvider", "x") == {
        "type": "InstanceExists", "status": "Unknown", "reason": "ErrorCheckingProvider",
        "message": "x"}
