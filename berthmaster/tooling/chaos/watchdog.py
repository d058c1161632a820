"""The checker's watchdog: a checker that stops looking must fail the run, not pass it.

A campaign passes when no rule finds a breach, so a rule that stops running passes vacuously:
a mirror whose handler raised (its task ends, the copy freezes), a delayed check that raised
(nobody awaits it), a watch that hangs. The watchdog turns each of those into a breach-like
line naming the task and what ended it.

Design: tasks are registered by name, with whether they may finish on their own (a delayed
check does; a mirror, the supervisor or a liveness loop must run until the campaign stops).
:func:`task_problem` judges one finished task and :func:`stale_problem` one mirror's progress,
both pure; :meth:`Watchdog.check` applies them to every registered task and forgets the ones
that finished cleanly. The campaign calls :meth:`Watchdog.stop` *before* it cancels anything,
so its own cancellations are never reported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# A mirror's watch ends every 60 s (checker.WATCH_SECONDS) and is relisted, bookmarks come in
# between: a mirror with no progress for this long is stuck, API server restarts included.
STALE_AFTER = 180.0


def task_problem(name: str, task: asyncio.Task[Any], may_finish: bool) -> str | None:
    """What is wrong with a finished task: it raised, or it returned (or was cancelled by
    someone else) while it had to run until the campaign stops. None while it runs."""
    if not task.done():
        return None
    if task.cancelled():
        return None if may_finish else f"checker task {name} was cancelled during the run"
    error = task.exception()
    if error is not None:
        return f"checker task {name} died: {type(error).__name__}: {error}"
    if not may_finish:
        return f"checker task {name} ended during the run"
    return None


def stale_problem(name: str, synced: bool, last_progress: float, now: float,
                  bound: float = STALE_AFTER) -> str | None:
    """A mirror that never synced, or made no progress (a list, a watch event, a bookmark)
    for ``bound`` seconds (``last_progress`` and ``now`` on one clock)."""
    if not synced:
        return f"mirror {name} never synced"
    if now - last_progress > bound:
        return f"mirror {name} stale: no list or watch event for more than {bound:.0f}s"
    return None


@dataclass
class Watched:
    task: asyncio.Task[Any]
    may_finish: bool


@dataclass
class Watchdog:
    """Registered tasks and progress probes, checked on demand or every ``interval`` s."""

    report: Callable[[str], None]
    clock: Callable[[], float]
    bound: float = STALE_AFTER
    tasks: dict[str, Watched] = field(default_factory=dict)
    # name -> () -> (synced, last progress on ``clock``)
    progress: dict[str, Callable[[], tuple[bool, float]]] = field(default_factory=dict)
    stopped: bool = False
    serial: int = 0

    def watch(self, name: str, task: asyncio.Task[Any], may_finish: bool = False) -> None:
        if name in self.tasks:
            self.serial += 1
            name = f"{name}#{self.serial}"
        self.tasks[name] = Watched(task, may_finish)

    def probe(self, name: str, progress: Callable[[], tuple[bool, float]]) -> None:
        self.progress[name] = progress

    def check(self) -> list[str]:
        """Every problem now; tasks that finished (reported or clean) are forgotten."""
        if self.stopped:
            return []
        found = []
        for name, watched in list(self.tasks.items()):
            if not watched.task.done():
                continue
            problem = task_problem(name, watched.task, watched.may_finish)
            if problem:
                found.append(problem)
            del self.tasks[name]
        now = self.clock()
        for name, progress in self.progress.items():
            synced, last = progress()
            problem = stale_problem(name, synced, last, now, self.bound)
            if problem:
                found.append(problem)
        for problem in found:
            self.report(problem)
        return found

    def stop(self) -> None:
        """A last look; from then on nothing is reported (the campaign cancels its tasks)."""
        if not self.stopped:
            self.check()
        self.stopped = True

    async def run(self, interval: float = 1.0) -> None:
        while not self.stopped:
            self.check()
            await asyncio.sleep(interval)
