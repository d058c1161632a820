"""Idempotent event identity, and the reconcile queue's dedup, requeue and backoff."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from berthmaster.operator.machines.events import build_event, event_name
from berthmaster.operator.machines.workqueue import WorkQueue
from tests.support.waiting import wait_for
from tests.unit.operator.machines.machine_builders import make_machine

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_event_name_is_stable_per_machine_and_reason() -> None:
    machine = make_machine("m1")
    assert event_name(machine, "DrainBlocked") == event_name(machine, "DrainBlocked")
    assert event_name(machine, "DrainBlocked") != event_name(machine, "DrainProceeds")
    assert event_name(machine, "DrainBlocked") != event_name(make_machine("m2"), "DrainBlocked")
    event = build_event(machine, "DrainRequeued", "Node drain requeued: x", now=NOW, count=3)
    assert event["involvedObject"]["kind"] == "Machine"
    assert (event["reason"], event["count"], event["type"]) == ("DrainRequeued", 3, "Normal")
    assert event["lastTimestamp"] == "2026-01-01T00:00:00Z"


async def test_queue_dedups_requeues_and_backs_off() -> None:
    calls: list[str] = []
    gate = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        calls.append(key)
        if key == "slow":
            await gate.wait()
        if key == "flaky" and calls.count("flaky") < 3:
            raise RuntimeError("not yet")
        if key == "later" and calls.count("later") == 1:
            return 0.05
        return None

    queue: WorkQueue[str] = WorkQueue("test", reconcile, workers=2, base=0.01, cap=0.05)
    queue.start()
    try:
        queue.add("slow")
        await wait_for(lambda: calls == ["slow"], timeout=10, what="slow being reconciled",
                       interval=0.005)
        queue.add("slow")  # while running: runs once more afterwards, not concurrently
        queue.add("slow")
        queue.add("flaky")
        queue.add("later")
        # the other worker goes on while slow is held
        await wait_for(lambda: "later" in calls and "flaky" in calls, timeout=10,
                       what="flaky and later reconciled beside slow", interval=0.005)
        assert calls.count("slow") == 1
        gate.set()
        # every key done and nothing left to run: the counts below are final
        await wait_for(lambda: queue.idle, timeout=10, what="the queue idle", interval=0.005)
    finally:
        await queue.stop()
    assert calls.count("slow") == 2
    assert calls.count("flaky") == 3
    assert calls.count("later") == 2


async def test_queue_retries_only_transient_api_errors(caplog: Any) -> None:
    """A 503 (or no answer, 409, 429) is retried with backoff; a 403 or 422 is logged and not
    retried until the next event (the operator retries only what is transient:
    operator/retrying.py).
    client-go's ``IsRetryableError`` cases: k8s.io/apimachinery/pkg/util/net ``IsProbableEOF``,
    apierrors ``IsServerTimeout``/``IsTooManyRequests``/``IsConflict``."""
    from berthmaster.foundation.kube import KubeError

    calls: list[str] = []
    errors = {"unavailable": KubeError(503, "ServiceUnavailable", "etcd leader changed"),
              "forbidden": KubeError(403, "Forbidden", "machines is forbidden")}

    async def reconcile(key: str) -> float | None:
        calls.append(key)
        if calls.count(key) < 3:
            raise errors[key]
        return None

    queue: WorkQueue[str] = WorkQueue("test", reconcile, workers=2, base=0.01, cap=0.05)
    queue.start()
    try:
        queue.add("forbidden")
        queue.add("unavailable")
        await wait_for(lambda: calls.count("unavailable") == 3, timeout=10, what="3 attempts")
    finally:
        await queue.stop()
    assert calls.count("forbidden") == 1
    assert "reconcile forbidden failed and is not retried (403 Forbidden: machines is " \
           "forbidden is not transient" in caplog.text
    assert "reconcile unavailable failed (retry in 0.0" in caplog.text


@pytest.mark.parametrize(("status", "transient"), [
    (0, True), (408, True), (409, True), (429, True), (500, True), (503, True), (504, True),
    (400, False), (401, False), (403, False), (404, False), (410, False), (422, False)])
def test_kopf_handlers_retry_only_transient_errors(status: int, transient: bool) -> None:
    import kopf

    from berthmaster.foundation.kube import KubeError
    from berthmaster.operator.retrying import as_kopf_error

    error = as_kopf_error(KubeError(status, "Reason", "message"))
    assert isinstance(error, kopf.TemporaryError if transient else kopf.PermanentError)
    assert ("transient: retrying in 10 s" in str(error)) is transient
