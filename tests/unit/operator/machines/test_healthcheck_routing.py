"""Which MachineHealthChecks a watch event brings back (upstream's mhcRequestsFromMachine and
mhcRequestsFromNode in machinehealthcheck_controller.go: every check that may select the
Machine; here every check of its namespace, the reconcile applying the selector)."""

from __future__ import annotations

from berthmaster.operator.machines.healthcheck_handlers import HealthCheckRuntime
from tests.support.waiting import wait_for


class Recorder:
    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []

    async def reconcile(self, key: tuple[str, str]) -> float | None:
        self.keys.append(key)
        return None


async def drained(runtime: HealthCheckRuntime) -> None:
    """Every key the events brought has been reconciled and nothing else is due."""
    await wait_for(lambda: runtime.queue.idle, timeout=10, what="the queue idle",
                   interval=0.005)


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
        await drained(runtime)
        recorder.keys.clear()
        runtime.namespace_changed("a")  # a Machine of namespace a changed
        runtime.node_changed({"metadata": {"name": "n", "annotations": {
            "machine.openshift.io/machine": "b/m"}}})
        runtime.node_changed({"metadata": {"name": "plain"}})  # not a Machine's Node
        await drained(runtime)
        assert sorted(recorder.keys) == [("a", "one"), ("b", "three")]
    finally:
        await runtime.queue.stop()
