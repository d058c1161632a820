"""The operator's one API client (operator/client.py): every capability gets the same client,
opened once however many ask at the same time, and the cleanup stops the capabilities' work
queues before it closes the client (never a worker holding a closed client)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.client import SharedClient


class Journal:
    """What happened, in order: the connects, the stops and the close."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    async def connect(self) -> KubeClient:
        self.entries.append("connect")
        await asyncio.sleep(0)  # let a concurrent get() reach the lock
        return cast(KubeClient, self)

    async def close(self) -> None:
        self.entries.append("close")

    def stop(self, name: str) -> Any:
        async def stop() -> None:
            self.entries.append(f"stop {name}")
        return stop


async def test_concurrent_users_share_one_client_opened_once() -> None:
    journal = Journal()
    shared = SharedClient(journal.connect)
    first, second = await asyncio.gather(shared.get(), shared.get())
    assert first is second
    assert journal.entries == ["connect"]


async def test_cleanup_stops_the_queues_then_closes_the_client_once() -> None:
    journal = Journal()
    shared = SharedClient(journal.connect)
    await shared.get()
    shared.stop_before_close(journal.stop("machines"))
    shared.stop_before_close(journal.stop("machinehealthchecks"))
    await shared.close()
    await shared.close()  # a second cleanup finds nothing to stop or close
    assert journal.entries == ["connect", "stop machines", "stop machinehealthchecks", "close"]


async def test_cleanup_without_a_client_opens_none() -> None:
    journal = Journal()
    await SharedClient(journal.connect).close()
    assert journal.entries == []
