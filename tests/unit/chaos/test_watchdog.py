"""The checker's watchdog over real asyncio tasks: a task that raises, or ends while it had to
run, or a mirror that stops progressing, is reported by name; tasks that finish cleanly, and
the campaign's own cancellations after ``stop``, are not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import cast

from berthmaster.foundation.kube import KubeClient
from berthmaster.tooling.chaos.checker import Checker, Mirror
from berthmaster.tooling.chaos.watchdog import Watchdog, stale_problem, task_problem


async def _raise() -> None:
    await asyncio.sleep(0)
    raise KeyError("spec")


async def _return() -> None:
    await asyncio.sleep(0)


async def _forever() -> None:
    await asyncio.Event().wait()


async def _finished(coroutine: object) -> asyncio.Task[None]:
    task: asyncio.Task[None] = asyncio.create_task(coroutine)  # type: ignore[arg-type]
    await asyncio.wait([task])
    return task


def test_task_problem_names_the_task_and_the_exception() -> None:
    async def run() -> None:
        raised = await _finished(_raise())
        assert task_problem("mirror /api/v1/pods", raised, may_finish=True) == \
            "checker task mirror /api/v1/pods died: KeyError: 'spec'"
        returned = await _finished(_return())
        assert task_problem("delayed bind check", returned, may_finish=True) is None
        assert task_problem("mirror /api/v1/pods", returned, may_finish=False) == \
            "checker task mirror /api/v1/pods ended during the run"
        running = asyncio.create_task(_forever())
        await asyncio.sleep(0)
        assert task_problem("liveness", running, may_finish=False) is None
        running.cancel()
        await asyncio.wait([running])
        assert task_problem("liveness", running, may_finish=False) == \
            "checker task liveness was cancelled during the run"
    asyncio.run(run())


def test_stale_problem() -> None:
    assert stale_problem("pods", synced=False, last_progress=0.0, now=1.0) == \
        "mirror pods never synced"
    assert stale_problem("pods", synced=True, last_progress=100.0, now=279.0, bound=180) is None
    assert stale_problem("pods", synced=True, last_progress=100.0, now=281.0, bound=180) == \
        "mirror pods stale: no list or watch event for more than 180s"


def test_the_watchdog_reports_each_problem_once_and_nothing_after_stop() -> None:
    reported: list[str] = []
    clock = [0.0]
    progress = {"last": 0.0}

    async def run() -> None:
        dog = Watchdog(reported.append, lambda: clock[0], bound=10)
        dog.probe("nodes", lambda: (True, progress["last"]))
        dog.watch("mirror nodes", asyncio.create_task(_raise()))
        dog.watch("delayed check", asyncio.create_task(_return()), may_finish=True)
        forever = asyncio.create_task(_forever())
        dog.watch("supervisor", forever)
        await asyncio.sleep(0.01)
        assert dog.check() == ["checker task mirror nodes died: KeyError: 'spec'"]
        assert dog.check() == []  # finished tasks are forgotten once judged
        clock[0] = 11.0
        assert dog.check() == ["mirror nodes stale: no list or watch event for more than 10s"]
        progress["last"] = 11.0
        assert dog.check() == []
        dog.stop()
        forever.cancel()
        await asyncio.wait([forever])
        assert dog.check() == []
    asyncio.run(run())
    assert reported == ["checker task mirror nodes died: KeyError: 'spec'",
                        "mirror nodes stale: no list or watch event for more than 10s"]


def test_a_delayed_check_that_raises_is_a_breach_naming_it() -> None:
    """``Checker.later`` used to run its check in a task nobody awaited, and ``stop`` dropped
    the exception: a broken rule passed the run."""
    async def run() -> Checker:
        breaches: list[str] = []
        checker = Checker(cast(KubeClient, object()), "chaos", ("ns", "lease"), "machines",
                          breaches.append)

        def broken() -> None:
            raise ValueError("no such node")
        checker.later(0.0, broken, "bind check of work/p")
        await asyncio.sleep(0.05)
        checker.watchdog.check()
        await checker.stop()
        return checker
    checker = asyncio.run(run())
    assert checker.breaches == [
        "checker task delayed bind check of work/p died: ValueError: no such node"]


class _OneEventKube:
    """Serves a list of one pod, then a watch with one MODIFIED event, then nothing."""

    async def list_all(self, path: str, **params: object) -> tuple[list[dict[str, object]], str]:
        return [{"metadata": {"name": "p", "namespace": "w", "resourceVersion": "1"}}], "1"

    async def watch(self, path: str, version: str, timeout_seconds: int = 60,
                    **params: object) -> AsyncIterator[dict[str, object]]:
        yield {"type": "MODIFIED",
               "object": {"metadata": {"name": "p", "namespace": "w", "resourceVersion": "2"}}}
        await asyncio.Event().wait()


def test_a_mirror_whose_handler_raises_is_a_breach() -> None:
    """Mirror.run relists on API errors only; a rule that raises ends its task. That used to
    freeze the copy in silence; now the watchdog names the mirror and the exception."""
    def handler(kind: str, obj: dict[str, object], old: dict[str, object] | None) -> None:
        if kind == "MODIFIED":
            raise KeyError("nodeName")

    async def run() -> list[str]:
        reported: list[str] = []
        dog = Watchdog(reported.append, time.monotonic)
        mirror = Mirror(cast(KubeClient, _OneEventKube()), "/api/v1/pods", handler)
        dog.watch(f"mirror {mirror.path}", asyncio.create_task(mirror.run()))
        await asyncio.wait_for(mirror.synced.wait(), 5)
        for _ in range(100):
            if dog.check():
                break
            await asyncio.sleep(0.01)
        return reported
    assert asyncio.run(run()) == ["checker task mirror /api/v1/pods died: KeyError: 'nodeName'"]
