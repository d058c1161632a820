"""One step repeated every few seconds, as one named asyncio task (the descheduler's loops).

Design: the operator's descheduler capability has two loops that must not be kopf timers (a
timer or daemon puts kopf's finalizer on every object, so deleting one would wait for the
operator, and a timer logs every tick): the Descheduler runs' reporter (handlers.py) and the
KubeDescheduler's runner (kubedescheduler.py). :class:`Periodic` is both: ``start`` creates the
task, each tick awaits ``step`` and a KubeError is logged (the next tick tries again), and
``stop`` cancels the task and waits for it, registered to run before the operator's client
closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from berthmaster.kube import KubeError

log = logging.getLogger("berthmaster.operator.deschedulers")


class Periodic:
    def __init__(self, name: str, step: Callable[[], Awaitable[None]], interval: float,
                 failure: str):
        self.name = name
        self.step = step
        self.interval = interval
        self.failure = failure  # what the log line says could not be done
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=self.name)

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except KubeError as error:
                log.warning("%s: %s", self.failure, error)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
