"""The campaign's verdict on one scheduled descheduler run (chaos/deschedruns.py ``judge``):
it completes (exit 0) within the bound; a hung or failed run is a breach, unless it failed
while the API server or etcd was down (the command's exit 3 or 1,
scheduler/descheduler/command.py)."""

from __future__ import annotations

from berthmaster.tooling.chaos.deschedruns import OUTAGE_GRACE, RUN_BOUND, judge


def test_a_run_that_exits_0_completed() -> None:
    assert judge(0, 100.0, 103.5, []) == ("completed", "completed in 3.5s")


def test_a_run_killed_at_the_bound_is_a_breach_even_in_an_outage() -> None:
    assert judge(None, 100.0, 100.0 + RUN_BOUND, [(110.0, 120.0)]) == (
        "breach", f"a descheduler run did not finish within {RUN_BOUND:.0f}s (killed)")


def test_a_failed_run_with_the_control_plane_up_is_a_breach() -> None:
    assert judge(3, 100.0, 104.0, [(10.0, 20.0), (200.0, 210.0)]) == (
        "breach", "a descheduler run exited 3 after 4.0s with the control plane up")


def test_a_failed_run_during_or_near_an_outage_is_the_outages() -> None:
    during = judge(3, 100.0, 104.0, [(90.0, 101.0)])
    assert during == ("outage", "exit 3 while the control plane was down")
    just_after = judge(1, 100.0 + OUTAGE_GRACE - 1, 120.0, [(90.0, 100.0)])
    assert just_after[0] == "outage"
    too_late = judge(1, 100.0 + OUTAGE_GRACE + 1, 120.0, [(90.0, 100.0)])
    assert too_late[0] == "breach"
