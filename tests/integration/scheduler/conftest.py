"""Running the scheduler against the test session's control plane.

``run_scheduler`` starts a :class:`SchedulerService` in-process (an asyncio task in the test's
event loop) with a scheduler name unique to the test, so tests never see each other's pods;
every instance is stopped (gracefully) after the test. Pod builders live in ``schedkit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from berthmaster.scheduler.config import default_profile
from berthmaster.scheduler.daemon.service import SchedulerService, options


@dataclass
class RunningScheduler:
    service: SchedulerService
    task: asyncio.Task[int]
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return self.service.name

    async def stop(self) -> int:
        self.stop_event.set()
        return await asyncio.wait_for(self.task, timeout=30)


class SchedulerRunner:
    def __init__(self, kubeconfig: str):
        self.kubeconfig = kubeconfig
        self.name = f"bm-{uuid.uuid4().hex[:6]}"
        self.running: list[RunningScheduler] = []

    async def start(self, policy: Any = None, **overrides: Any) -> RunningScheduler:
        settings: dict[str, Any] = {"kubeconfig": self.kubeconfig, "scheduler_name": self.name,
                                    "leader_elect": False, "metrics_bind_address": "",
                                    "kube_api_qps": 0.0}
        settings.update(overrides)
        service = await SchedulerService.create(options(**settings), policy or default_profile())
        stop = asyncio.Event()
        handle = RunningScheduler(service, asyncio.create_task(service.run(stop)), stop)
        self.running.append(handle)
        return handle

    async def stop_all(self) -> None:
        for handle in self.running:
            if not handle.task.done():
                with contextlib.suppress(Exception):
                    await handle.stop()


@pytest.fixture
async def run_scheduler(cluster: Any) -> AsyncIterator[SchedulerRunner]:
    runner = SchedulerRunner(str(cluster.kubeconfig))
    try:
        yield runner
    finally:
        await runner.stop_all()
