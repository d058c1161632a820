"""The collector is off while the initial lists load and back on after (daemon/command.py)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from berthmaster.scheduler.daemon.command import freeze_after_sync


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def service_with(*informers: asyncio.Event) -> SimpleNamespace:
    return SimpleNamespace(cache=SimpleNamespace(
        informers=[SimpleNamespace(synced=event) for event in informers]))


@pytest.mark.usefixtures("collector_off")
def test_the_collector_comes_back_once_every_informer_synced() -> None:
    async def scenario() -> None:
        pods, nodes = asyncio.Event(), asyncio.Event()
        freezing = asyncio.create_task(freeze_after_sync(service_with(pods, nodes)))
        pods.set()
        await asyncio.sleep(0.01)
        assert not gc.isenabled() and not freezing.done()  # the nodes are still loading
        nodes.set()
        await freezing

    asyncio.run(scenario())
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("collector_off")
def test_a_run_stopped_before_its_sync_leaves_the_collector_on() -> None:
    async def scenario() -> None:
        freezing = asyncio.create_task(freeze_after_sync(service_with(asyncio.Event())))
        await asyncio.sleep(0.01)
        freezing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await freezing

    asyncio.run(scenario())
    assert gc.isenabled()
