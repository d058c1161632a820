"""Idempotent event identity, and the reconcile queue's dedup, requeue and backoff."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from berthmaster.operator.machines.events import build_event, event_name
from berthmaster.operator.machines.workqueue import WorkQueue
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
        await asyncio.sleep(0.02)
        queue.add("slow")  # while running: runs once more afterwards, not concurrently
        queue.add("slow")
        queue.add("flaky")
        queue.add("later")
        await asyncio.sleep(0.02)
        gate.set()
        await asyncio.sleep(0.3)
    finally:
        await queue.stop()
    assert calls.count("slow") == 2
    assert calls.count("flaky") == 3
    assert calls.count("later") == 2
