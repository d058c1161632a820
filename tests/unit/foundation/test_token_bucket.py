"""The client's rate limiter: client-go's token bucket (util/flowcontrol/throttle.go,
``NewTokenBucketRateLimiter`` over golang.org/x/time/rate): ``burst`` requests at once, then
``qps`` a second; and the fence asked after its wait (berthmaster/foundation/kube.py)."""

from __future__ import annotations

import asyncio

import pytest

from berthmaster.foundation.kube import Fenced, TokenBucket, watch_timeout_seconds
from tests.support.clock import FakeClock


async def test_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=20, burst=30, clock=clock, sleep=clock.sleep)
    for _ in range(30):
        await bucket.acquire()
    assert clock.now == 0.0 and not clock.slept  # the full bucket: no wait
    for _ in range(20):
        await bucket.acquire()
    assert clock.now == pytest.approx(1.0)  # then 20 a second
    assert all(s == pytest.approx(0.05) for s in clock.slept)


async def test_tokens_accrue_while_idle_up_to_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock, sleep=clock.sleep)
    for _ in range(5):
        await bucket.acquire()
    assert bucket.delay() == pytest.approx(0.1)
    clock.now += 100.0  # idle: at most ``burst`` tokens saved
    for _ in range(5):
        await bucket.acquire()
    assert not clock.slept
    assert bucket.delay() == pytest.approx(0.1)


async def test_waiters_are_served_in_turn() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=1, clock=clock, sleep=clock.sleep)
    await asyncio.gather(*(bucket.acquire() for _ in range(5)))
    assert clock.now == pytest.approx(2.0)  # 1 at once, then 4 at 2 a second


def test_fenced_is_not_transient() -> None:
    error = Fenced("DELETE", "/api/v1/namespaces/a/pods/b")
    assert error.fenced and not error.transient and error.reason == "NotLeading"


@pytest.mark.parametrize(("draw", "expected"), [(0.0, 300), (0.5, 450), (0.999, 599)])
def test_watch_timeouts_as_the_reflector(draw: float, expected: int) -> None:
    """reflector.go: ``minWatchTimeout * (rand.Float64() + 1.0)``, minWatchTimeout 5 min."""
    assert watch_timeout_seconds(rng=lambda: draw) == expected
