"""Leader election's decision rules (client-go's tryAcquireOrRenew), pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeError
from berthmaster.scheduler.daemon.leader import (
    LeaderElector,
    LeaseRecord,
    Observation,
    decide,
    loss_reason,
)

WALL = datetime(2026, 1, 1, tzinfo=UTC)


def held_by(holder: str, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(holder, 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z",
                       transitions)


def test_missing_lease_is_created_held_by_us() -> None:
    decision = decide("me", None, Observation(), now=100.0, wall=WALL, lease_duration=15)
    assert decision.action == "create"
    assert decision.record is not None
    assert decision.record.holder == "me" and decision.record.transitions == 0


def test_lease_held_by_other_is_respected_for_its_duration_on_our_clock() -> None:
    other = held_by("other")
    first = decide("me", other, Observation(), now=100.0, wall=WALL, lease_duration=15)
    assert first.action == "wait"
    assert first.observation == Observation(other, 100.0)
    still = decide("me", other, first.observation, now=114.9, wall=WALL, lease_duration=15)
    assert still.action == "wait"
    expired = decide("me", other, first.observation, now=115.1, wall=WALL, lease_duration=15)
    assert expired.action == "update"
    assert expired.record is not None
    assert expired.record.holder == "me" and expired.record.transitions == 4


def test_renewal_by_other_restarts_our_observation() -> None:
    seen = Observation(held_by("other"), 100.0)
    renewed = LeaseRecord("other", 15, "2026-01-01T00:00:00.000000Z",
                          "2026-01-01T00:00:10.000000Z", 3)
    decision = decide("me", renewed, seen, now=116.0, wall=WALL, lease_duration=15)
    assert decision.action == "wait"
    assert decision.observation.at == 116.0


def test_released_lease_is_taken_at_once() -> None:
    released = LeaseRecord("", 1, None, None, 5)
    decision = decide("me", released, Observation(), now=100.0, wall=WALL, lease_duration=15)
    assert decision.action == "update"
    assert decision.record is not None
    assert decision.record.transitions == 6 and decision.record.lease_duration == 15


def test_own_lease_is_renewed_keeping_acquire_time_and_transitions() -> None:
    mine = held_by("me", transitions=2)
    decision = decide("me", mine, Observation(mine, 50.0), now=100.0, wall=WALL,
                      lease_duration=15)
    assert decision.action == "update"
    assert decision.record is not None
    assert decision.record.acquire_time == mine.acquire_time
    assert decision.record.transitions == 2
    assert decision.record.renew_time == "2026-01-01T00:00:00.000000Z"


def test_elector_stops_being_leader_after_renew_deadline() -> None:
    now = [0.0]
    elector = LeaderElector(kube=None, namespace="kube-system", name="x",  # type: ignore[arg-type]
                            identity="me", clock=lambda: now[0])
    assert not elector.is_leader()
    elector._last_renew = 0.0
    now[0] = 9.9
    assert elector.is_leader()
    now[0] = 10.0
    assert not elector.is_leader()


def test_timings_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="lease duration > renew deadline"):
        LeaderElector(kube=None, namespace="ns", name="x", lease_duration=10,  # type: ignore[arg-type]
                      renew_deadline=10)


class _SlowLeaseServer:
    """A Lease store whose every answer takes ``delay`` seconds of the elector's clock."""

    def __init__(self, now: list[float], delay: float):
        self.now = now
        self.delay = delay
        self.lease: dict[str, Any] | None = None

    async def get(self, path: str) -> dict[str, Any]:
        self.now[0] += self.delay
        if self.lease is None:
            raise KubeError(404, "NotFound", "not found")
        return self.lease

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.now[0] += self.delay
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
        return self.lease

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.create(path, body)


async def test_a_renewal_counts_from_when_its_request_started() -> None:
    """client-go stamps ``renewTime`` with the clock read when tryAcquireOrRenew starts
    (tools/leaderelection/leaderelection.go), and the other candidates' clocks start when they
    read it: a reply that took 8 s leaves 2 s of the 10 s renew deadline, not 10."""
    now = [100.0]
    server = _SlowLeaseServer(now, delay=4.0)
    elector = LeaderElector(kube=server, namespace="ns", name="x",  # type: ignore[arg-type]
                            identity="me", clock=lambda: now[0])
    assert await elector.try_acquire_or_renew()  # started at 100, answered at 108
    assert now[0] == 108.0
    now[0] = 109.9
    assert elector.is_leader()
    now[0] = 110.0
    assert not elector.is_leader()


def test_a_lost_lease_names_why() -> None:
    """What a leader logs before it stops (client-go tools/leaderelection/leaderelection.go
    ``renew``: ``failed to renew lease``, then ``leaderelection lost``): taken by another
    candidate, or not renewed within the renew deadline (the scheduling loop may see that
    before the renewal loop does, under a slow API server)."""
    assert loss_reason("me", "other", 10.0, 11.0, 3.0) == "the Lease is held by other"
    assert loss_reason("me", "me", 10.0, 13.5, 3.0) == (
        "not renewed for 3.5s, past the renew deadline of 3s")
    assert loss_reason("me", "", None, 13.5, 3.0) == (
        "the Lease was not held (never acquired, or released)")
    assert loss_reason("me", "me", 10.0, 11.0, 3.0) == (
        "renewed 1.0s ago, within the renew deadline of 3s")
