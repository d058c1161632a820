"""Which MachineHealthChecks a watch event brings back (upstream's mhcRequestsFromMachine and
mhcRequestsFromNode in machinehealthcheck_controller.go: every check that may select the
Machine; here every check of its namespace, the reconcile applying the selector)."""

from __future__ import annotations

import asyncio

from berthmaster.operator.machines.healthcheck_handlers import HealthCheckRuntime


class Recorder:
    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []

    async def reconcile(self, key: tuple[str, str]) -> float | None:
        self.keys.append(key)
        return None


def check(namespace: str, name: str) -> dict[str, object]:
    return {"metadata": {"namespace": namespace, "name": name}}


async def test_events_bring_back_the_checks_of_their_namespace() -> None:
    recorder = Recorder()
    runtime = HealthCheckRuntime(recorder.reconcile)
    runtime.queue.start()
    try:
        for namespace, name in (("a", "one"), ("a", "two"), ("b", "three")):
            runtime.check_changed("ADDED", check(namespace, name))
        runtime.check_changed("DELETED", check("a", "two"))
        await asyncio.sleep(0.05)
        recorder.keys.clear()
        runtime.namespace_changed("a")  # a Machine of namespace a changed
        runtime.node_changed({"metadata": {"name": "n", "annotations": {
            "machine.openshift.io/machine": "b/m"}}})
        runtime.node_changed({"metadata": {"name": "plain"}})  # not a Machine's Node
        await asyncio.sleep(0.05)
        assert sorted(recorder.keys) == [("a", "one"), ("b", "three")]
    finally:
        await runtime.queue.stop()
