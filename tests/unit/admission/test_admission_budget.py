"""The bytes of review bodies one replica holds at once (operator/admission/budget.py, the
``--max-in-flight-bytes`` budget)."""

from __future__ import annotations

from berthmaster.operator.admission.budget import ByteBudget, Reservation
from berthmaster.operator.admission.options import (
    DEFAULT_MAX_IN_FLIGHT_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
)


def test_a_reservation_that_does_not_fit_takes_nothing() -> None:
    budget = ByteBudget(100)
    assert budget.reserve(60)
    assert not budget.reserve(41)
    assert budget.reserved == 60
    assert budget.reserve(40)
    assert not budget.reserve(1)
    budget.release(100)
    assert budget.reserved == 0
    assert not budget.reserve(-1)


def test_a_reservation_grows_chunk_by_chunk_and_gives_everything_back() -> None:
    budget = ByteBudget(100)
    large, small = Reservation(budget), Reservation(budget)
    assert large.take(64) and large.take(32)
    assert not large.take(8)  # the chunk that does not fit
    assert large.size == 96 and budget.reserved == 96
    assert small.take(4)
    large.release()
    small.release()
    assert budget.reserved == 0 and large.size == 0
    large.release()  # twice: nothing more given back
    assert budget.reserved == 0


def test_the_default_budget_holds_two_of_the_largest_reviews_in_256mi() -> None:
    """Raw and parsed, a body costs three to ten times its size (docs/admission.md); beside
    the process's own ~55 MiB that stays under the chart's 256Mi memory limit."""
    assert DEFAULT_MAX_IN_FLIGHT_BYTES == 16 * 1024 * 1024
    assert DEFAULT_MAX_IN_FLIGHT_BYTES // DEFAULT_MAX_REQUEST_BYTES == 2
    assert 10 * DEFAULT_MAX_IN_FLIGHT_BYTES + 64 * 1024 * 1024 < 256 * 1024 * 1024

