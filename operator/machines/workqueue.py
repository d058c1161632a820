"""A reconcile queue in client-go's workqueue manner: keys, not events; retries with backoff.

Why not kopf's changing handlers: a Machine's deletion is a state machine that must keep running
while the object carries a deletionTimestamp, behind upstream's own finalizer
(``machine.machine.openshift.io``). kopf's on-create/update handlers stop at deletion, and its
retries (on-delete handlers, timers) need kopf's finalizer on every Machine. So kopf watches
(``@kopf.on.event`` handlers add keys here) and this queue reconciles.

Semantics:

- a key is reconciled by at most one worker at a time; adding a key that is being reconciled
  marks it dirty and it runs again once the current pass ends (no event is lost);
- a reconcile returns ``None`` (done until the next event) or a delay (run again after it);
- a reconcile that raises is retried with exponential backoff per key (``base`` doubling up to
  ``cap``), reset after a success; the error is logged with the key and the delay. An API error
  that is not transient (``KubeError.transient``: 403, 422, ...) is not retried: it is logged
  as an error and the key waits for the next event, as nothing would change by retrying;
- delayed adds keep the earliest due time for a key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from berthmaster.foundation.kube import KubeError

K = TypeVar("K", bound=Hashable)
Reconcile = Callable[[K], Awaitable[float | None]]


class WorkQueue(Generic[K]):
    def __init__(self, name: str, reconcile: Reconcile[K], *, workers: int = 4,
                 base: float = 0.5, cap: float = 30.0):
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.base = base
        self.cap = cap
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._due: dict[K, float] = {}
        self._failures: dict[K, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.log = logging.getLogger(f"berthmaster.operator.machines.{name}")

    def add(self, key: K, after: float = 0.0) -> None:
        """Reconcile ``key`` now (or after ``after`` seconds)."""
        if after > 0:
            loop = asyncio.get_running_loop()
            due = loop.time() + after
            if key in self._due and self._due[key] <= due:
                return
            if key in self._timers:
                self._timers[key].cancel()
            self._due[key] = due
            self._timers[key] = loop.call_at(due, self._fire, key)
            return
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    @property
    def idle(self) -> bool:
        """No key queued, being reconciled, or waiting for its delay (nothing more will run
        until the next ``add``)."""
        return not (self._queued or self._active or self._dirty or self._timers)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self._due.pop(key, None)
        self.add(key)

    @property
    def running(self) -> bool:
        """Started, not stopped, and no worker ended (a worker only ends by a bug)."""
        return bool(self._tasks) and not any(task.done() for task in self._tasks)

    def start(self) -> None:
        for index in range(self.workers):
            self._tasks.append(asyncio.create_task(self._work(), name=f"{self.name}-{index}"))

    async def stop(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _work(self) -> None:
        while True:
            key = await self._ready.get()
            self._queued.discard(key)
            self._active.add(key)
            try:
                delay = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # never fatal to the worker
                if isinstance(error, KubeError) and not error.transient:
                    self._failures.pop(key, None)
                    delay = None
                    self.log.error("reconcile %s failed and is not retried (%s is not transient; "
                                   "the next change reconciles it again)", key, error)
                else:
                    failures = self._failures.get(key, 0) + 1
                    self._failures[key] = failures
                    delay = min(self.cap, self.base * 2 ** (failures - 1))
                    self.log.warning("reconcile %s failed (retry in %.1fs): %s", key, delay,
                                     error)
            else:
                self._failures.pop(key, None)
            finally:
                self._active.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif delay is not None:
                self.add(key, after=delay)
