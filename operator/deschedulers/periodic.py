"""One step repeated every few seconds, as one named asyncio task (the descheduler's loops).

Design: the operator's descheduler capability has two loops that must not be kopf timers (a
timer or daemon puts kopf's finalizer on every object, so deleting one would wait for the
operator, and a timer logs every tick): the Descheduler runs' reporter (handlers.py) and the
KubeDescheduler's runner (kubedescheduler.py). :class:`Periodic` is both: ``start`` creates the
task, each tick awaits ``step`` and a KubeError is logged (the next tick tries again), and
``stop`` cancels the task and waits for it, registered to run before the operator's client
closes. Both loops also follow a kopf watch (a :class:`Watcher`): :func:`start_watched` installs
the loop as the capability's runtime (operator/capability.py), kept in kopf's memo, where the
``@kopf.on.event`` handler's :func:`deliver` finds its watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Protocol

from berthmaster.foundation.kube import KubeError
from berthmaster.operator.capability import install

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

    def ready(self) -> tuple[bool, str]:
        if self.task is None or self.task.done():
            return False, f"the {self.name} loop is not running"
        return True, "ok"


class Watcher(Protocol):
    """A loop's step and what it learns from a kopf watch."""

    def seen(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...

    async def step(self) -> None: ...


class WatchedLoop(Periodic):
    """A :class:`Periodic` over a watcher's step, keeping the watcher for :func:`deliver`: the
    capability's runtime (operator/capability.py)."""

    def __init__(self, name: str, watcher: Watcher, interval: float, failure: str):
        super().__init__(name, watcher.step, interval, failure)
        self.watcher = watcher


def start_watched(memo: MutableMapping[str, Any], name: str, watcher: Watcher, interval: float,
                  failure: str) -> None:
    """Run ``watcher.step`` every ``interval`` seconds until the operator's client closes,
    installed as the runtime ``name`` (kept in kopf's memo for :func:`deliver`)."""
    install(memo, name, WatchedLoop(name, watcher, interval, failure))


def deliver(memo: Mapping[str, Any], name: str, event_type: str | None,
            body: Mapping[str, Any]) -> None:
    """Hand a watch event to the watcher :func:`start_watched` kept (none yet: dropped)."""
    runtime = memo.get(name)
    if isinstance(runtime, WatchedLoop):
        runtime.watcher.seen(event_type, body)
