"""The two example hook-implementing controllers in examples/machine_hooks, against the real
operator: the preDrain hook holds a MachineSet's Machine until its replacement runs; the
preTerminate hook holds the instance for a log-flush delay after the drain."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    set_hooks,
)
from tests.integration.operator.machines.test_machinesets import (
    machines_of,
    machineset,
    scale,
    settle,
)
from tests.support.waiting import wait_for

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "machine_hooks"
DELAY = 3.0


def load(name: str) -> Any:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


async def test_replacement_and_log_flush_hooks(kube: KubeClient, namespace: str,
                                               operator: OperatorProcess) -> None:
    replacement, log_flush = load("replacement_hook"), load("log_flush_hook")
    name = f"{namespace}-hooked"
    selector = f"{api.MACHINESET_LABEL}={name}"
    await kube.create(api.machineset_path(namespace), machineset(name, 1))
    tasks = [asyncio.create_task(replacement.run(kube, namespace, selector, 0.5)),
             asyncio.create_task(log_flush.run(kube, namespace, selector, DELAY, 0.5))]
    try:
        [old] = await settle(kube, namespace, name, 1)
        old_name = old["metadata"]["name"]

        async def hooked() -> bool:
            machine = await get_machine(kube, namespace, old_name) or {}
            hooks = machine.get("spec", {}).get("lifecycleHooks", {})
            return bool(hooks.get("preDrain")) and bool(hooks.get("preTerminate"))
        await wait_for(hooked, timeout=30, what="both example hooks added")

        await kube.delete(api.machine_path(namespace, old_name))

        async def old_gone() -> bool:
            return await get_machine(kube, namespace, old_name) is None

        last_seen: dict[str, Any] = {}

        async def watch_old() -> bool:
            machine = await get_machine(kube, namespace, old_name)
            if machine is None:
                return True
            last_seen.update(machine)
            return False
        await wait_for(watch_old, timeout=90, what="old machine deleted")
        gone_at = datetime.now(UTC).replace(tzinfo=None)
        progress = last_seen["status"]["deletionProgress"]
        [new] = await machines_of(kube, namespace, name)
        assert new["metadata"]["name"] != old_name
        # Drained only once the replacement existed and ran; terminated only after the delay.
        assert stamp(progress["drainStartedAt"]) >= stamp(new["metadata"]["creationTimestamp"])
        drained_at = stamp(condition(last_seen, "Drained")["lastTransitionTime"])
        assert (gone_at - drained_at).total_seconds() >= DELAY
        assert await old_gone()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    for machine in await machines_of(kube, namespace, name):
        await set_hooks(kube, namespace, machine["metadata"]["name"], "preDrain", [])
        await set_hooks(kube, namespace, machine["metadata"]["name"], "preTerminate", [])
    await scale(kube, namespace, name, 0)
    await settle(kube, namespace, name, 0)
