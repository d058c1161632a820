"""The operator killed at each step of a Machine's life and restarted: no step skipped, no side
effect repeated.

Two angles:

- ``test_operator_dies_after_every_write``: the Machine controller runs in-process with an API
  client that lets each "life" make exactly one successful write and then dies (the write has
  reached the server, the code after it never runs: the worst moment to crash). A fresh
  controller (no memory) continues each time, from creation to the finalizer's removal. Every
  side effect (Node creation, cordon, eviction, instance and Node deletion, events, finalizer
  changes) must happen exactly once, and the Machine must end deleted with its Node gone.
- ``test_sigkill_at_each_hook_stage``: the real operator process is SIGKILLed while the Machine
  is held at each stage (running, preDrain, drain blocked by a PDB, preTerminate), with hooks
  removed while it is down; each restart resumes where the last one stopped.
"""

from __future__ import annotations

import asyncio
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError, resource_path
from berthmaster.operator.machines import api
from berthmaster.operator.machines.controller import MachineController
from berthmaster.operator.machines.providers.kwok import KIND, KwokProvider
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    node_or_none,
    running_machine,
    set_hooks,
)
from tests.integration.operator.machines.test_drain import pdb, pdb_settled
from tests.support.crashing import Crash, OneWriteLife
from tests.support.waiting import wait_for


async def test_operator_dies_after_every_write(kube: KubeClient, namespace: str,
                                               machine_api: Any, cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-crashy"
    cleanup_nodes.append(name)
    key = (namespace, name)
    ledger: list[tuple[str, str, str]] = []

    async def live_until_quiet(limit: int = 80) -> int:
        """Restart after every crash until a life ends without writing; returns lives used."""
        for life in range(1, limit + 1):
            client = OneWriteLife(kube, ledger)
            providers = {KIND: KwokProvider(client)}  # type: ignore[arg-type]
            controller = MachineController(client, providers,  # type: ignore[arg-type]
                                           drain_wait=10, drain_backoff=0.2)
            try:
                await controller.reconcile(key)
            except Crash:
                continue
            return life
        raise AssertionError(f"still writing after {limit} lives: {ledger[-5:]}")

    await kube.create(api.machine_path(namespace), kwok_machine(
        name, taints=[{"key": "key1", "value": "value1", "effect": "NoSchedule"}]))
    await live_until_quiet()
    machine = await get_machine(kube, namespace, name)
    assert machine is not None and machine["status"]["phase"] == "Running"
    node = await kube.get(api.node_path(name))
    assert {"key": "key1", "value": "value1", "effect": "NoSchedule"} in node["spec"]["taints"]

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"},
           "spec": {"nodeName": name, "containers": [{"name": "c", "image": "busybox"}]}}
    await kube.create(resource_path("/api/v1", "pods", namespace), pod)
    await kube.delete(api.machine_path(namespace, name))
    for _ in range(20):  # a pass that only waits (e.g. for pods to go) writes nothing
        await live_until_quiet()
        if await get_machine(kube, namespace, name) is None:
            break
        await asyncio.sleep(0.2)
    assert await get_machine(kube, namespace, name) is None
    assert await node_or_none(kube, name) is None

    assert len(ledger) >= 15, ledger  # every step of the life was a separate crash
    side_effects = [entry for entry in ledger if not entry[1].endswith("/status")]
    assert len(side_effects) == len(set(side_effects)), f"repeated: {side_effects}"
    paths = [(method, path) for method, path, _ in side_effects]
    assert paths.count(("POST", api.node_path())) == 1
    assert paths.count(("PATCH", api.node_path(name))) == 1  # the cordon
    assert paths.count(("POST", resource_path("/api/v1", "pods", namespace, "app",
                                              "eviction"))) == 1
    assert paths.count(("DELETE", api.node_path(name))) == 1
    events = await machine_events(kube, namespace, name)  # asserts one event per reason
    assert {reason: event["count"] for reason, event in events.items()} == {
        "Created": 1, "DrainProceeds": 1, "Deleted": 1, "DrainSucceeded": 1}


async def test_sigkill_at_each_hook_stage(kube: KubeClient, namespace: str,
                                          own_operator: OperatorProcess,
                                          cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-killed"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(
        name, pre_drain=[("Migrate", "migration-controller")],
        pre_terminate=[("Backup", "backup-controller")]))
    await running_machine(kube, namespace, name)
    own_operator.kill()
    own_operator.start()
    for index in range(2):
        await kube.create(resource_path("/api/v1", "pods", namespace), {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-{index}", "labels": {"app": "web"}},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "busybox"}]}})
    await pdb(kube, namespace, 2)
    await pdb_settled(kube, namespace, 2)

    await kube.delete(api.machine_path(namespace, name))

    async def has_event(reason: str) -> bool:
        return reason in await machine_events(kube, namespace, name)

    await wait_for(lambda: has_event("DrainBlocked"), timeout=30, what="DrainBlocked")
    own_operator.kill()  # held at preDrain
    await set_hooks(kube, namespace, name, "preDrain", [])  # the owner finishes while we are down
    own_operator.start()

    async def requeued() -> bool:
        events = await machine_events(kube, namespace, name)
        return events.get("DrainRequeued", {}).get("count", 0) >= 1
    # an attempt retries the refused evictions until its end (DRAIN_ATTEMPT_SECONDS) before it
    # is requeued
    await wait_for(requeued, timeout=60, what="drain blocked by the PDB")
    own_operator.kill()  # in the middle of a PDB-blocked drain
    before = (await get_machine(kube, namespace, name) or {})["status"]["deletionProgress"]
    own_operator.start()

    async def retried_after_restart() -> bool:
        machine = await get_machine(kube, namespace, name)
        attempts = (machine or {})["status"]["deletionProgress"]["drainAttempts"]
        return bool(attempts > before["drainAttempts"])
    await wait_for(retried_after_restart, timeout=60, what="drain retried after restart")
    after = (await get_machine(kube, namespace, name) or {})["status"]["deletionProgress"]
    assert after["drainStartedAt"] == before["drainStartedAt"]  # the same drain, continued
    await pdb(kube, namespace, 0)

    async def drained() -> bool:
        machine = await get_machine(kube, namespace, name)
        return condition(machine, "Drained").get("status") == "True"
    await wait_for(drained, timeout=60, what="Drained True")
    own_operator.kill()  # held at preTerminate
    own_operator.start()

    async def reconciled_after_restart() -> bool:
        # the controller logs the step it takes on each pass (operator/machines/controller.py)
        return (f"machine {namespace}/{name}: deletion step WaitForPreTerminateHooks"
                in own_operator.log_of_this_start())
    await wait_for(reconciled_after_restart, timeout=60, what="the restarted operator's pass")
    machine = await get_machine(kube, namespace, name)
    assert machine is not None and condition(machine, "Terminable")["status"] == "False"
    assert await node_or_none(kube, name) is not None
    own_operator.kill()
    await set_hooks(kube, namespace, name, "preTerminate", [])
    own_operator.start()

    async def gone() -> bool:
        return await get_machine(kube, namespace, name) is None
    await wait_for(gone, timeout=60, what="machine deleted")
    assert await node_or_none(kube, name) is None
    events = await machine_events(kube, namespace, name)  # one event object per reason
    counts = {reason: event["count"] for reason, event in events.items()}
    assert counts["Created"] == 1 and counts["DrainBlocked"] == 1
    assert counts["DrainSucceeded"] == 1
    assert counts["DrainProceeds"] == counts["DrainRequeued"] + 1
    assert own_operator.starts == 6
    try:
        await kube.get(resource_path("/api/v1", "pods", namespace, "web-0"))
        raise AssertionError("web-0 was not evicted")
    except KubeError as error:
        assert error.not_found
