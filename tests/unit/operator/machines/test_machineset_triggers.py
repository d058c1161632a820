"""When a MachineSet is reconciled: after its own reconcile (``next_sync``) and on which watch
events (``MachinesRuntime``). Upstream's MachineSet Reconcile requeues while replicas are not
Ready (15 s) or wait out minReadySeconds, and returns an empty Result at rest; its watches map
a Machine to its controlling MachineSet, or an orphan to every MachineSet of its namespace
(openshift/machine-api-operator pkg/controller/machineset/controller.go: Reconcile,
MachineToMachineSets)."""

from __future__ import annotations

from typing import Any

from berthmaster.operator.machines.handlers import MachinesRuntime
from berthmaster.operator.machines.machineset import controller_name, next_sync, node_readiness

READY = {"readyReplicas": 2, "availableReplicas": 2}


def test_a_machineset_at_rest_is_not_requeued() -> None:
    assert next_sync(2, 0, READY, False, 5.0) is None


def test_a_machineset_is_requeued_while_it_changes() -> None:
    assert next_sync(2, 0, READY, True, 5.0) == 0.0  # the next creation batch
    assert next_sync(2, -1, READY, False, 5.0) == 5.0  # Machines missing
    assert next_sync(2, 1, READY, False, 5.0) == 5.0  # Machines surplus
    assert next_sync(2, 0, {"readyReplicas": 1, "availableReplicas": 1}, False, 5.0) == 5.0
    # Ready, waiting out minReadySeconds
    assert next_sync(2, 0, {"readyReplicas": 2, "availableReplicas": 1}, False, 5.0) == 5.0


def node(name: str, ready: str | None = "True", when: str = "2026-01-01T00:00:00Z",
         heartbeat: str = "2026-01-01T00:00:00Z", machine: str = "ns/m1") -> dict[str, Any]:
    conditions = [] if ready is None else [{
        "type": "Ready", "status": ready, "lastTransitionTime": when,
        "lastHeartbeatTime": heartbeat}]
    return {"metadata": {"name": name, "annotations": {"machine.openshift.io/machine": machine}},
            "status": {"conditions": conditions}}


def test_node_readiness_ignores_heartbeats() -> None:
    assert node_readiness(node("a")) == node_readiness(node("a", heartbeat="2026-01-02T00:00:00Z"))
    assert node_readiness(node("a")) != node_readiness(node("a", ready="False"))
    assert node_readiness(node("a")) != node_readiness(node("a", when="2026-01-02T00:00:00Z"))
    assert node_readiness(node("a", ready=None)) is None
    assert node_readiness(None) is None


def machine(name: str, owner: str | None = "workers", namespace: str = "ns") -> dict[str, Any]:
    refs = [] if owner is None else [
        {"kind": "MachineSet", "name": owner, "controller": True, "uid": "u"}]
    return {"metadata": {"name": name, "namespace": namespace, "ownerReferences": refs}}


def test_controller_name() -> None:
    assert controller_name(machine("m1")) == "workers"
    assert controller_name(machine("m1", owner=None)) is None
    assert controller_name({"metadata": {"ownerReferences": [
        {"kind": "MachineSet", "name": "w", "controller": False}]}}) is None


def drain(runtime: MachinesRuntime) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The keys queued so far (the queues' workers are not started), machines and sets."""
    out = []
    for queue in (runtime.machine_queue, runtime.machineset_queue):
        keys = []
        while not queue._ready.empty():
            key = queue._ready.get_nowait()
            queue._queued.discard(key)
            keys.append(key)
        out.append(sorted(keys))
    return out[0], out[1]


async def test_node_events_bring_back_the_machineset_only_when_readiness_changes() -> None:
    runtime = MachinesRuntime(object(), providers={})  # type: ignore[arg-type]
    runtime.machine_changed(machine("m1"))
    drain(runtime)
    runtime.node_changed(node("n1"))  # first sight of the Node
    assert drain(runtime) == ([("ns", "m1")], [("ns", "workers")])
    runtime.node_changed(node("n1", heartbeat="2026-01-02T00:00:00Z"))  # a heartbeat
    assert drain(runtime) == ([("ns", "m1")], [])
    runtime.node_changed(node("n1", ready="False", when="2026-01-03T00:00:00Z"))
    assert drain(runtime) == ([("ns", "m1")], [("ns", "workers")])
    runtime.node_changed(node("n1", ready="False", when="2026-01-03T00:00:00Z"), deleted=True)
    assert drain(runtime) == ([("ns", "m1")], [("ns", "workers")])
    runtime.node_changed({"metadata": {"name": "plain"}})  # not a Machine's Node
    assert drain(runtime) == ([], [])


async def test_an_orphan_machine_brings_back_the_machinesets_of_its_namespace() -> None:
    runtime = MachinesRuntime(object(), providers={})  # type: ignore[arg-type]
    for namespace, name in (("ns", "workers"), ("ns", "infra"), ("other", "workers")):
        runtime.machineset_changed({"metadata": {"namespace": namespace, "name": name}})
    runtime.machineset_changed({"metadata": {"namespace": "ns", "name": "infra"}}, deleted=True)
    drain(runtime)
    runtime.machine_changed(machine("stray", owner=None))
    assert drain(runtime) == ([("ns", "stray")], [("ns", "workers")])
    runtime.machine_changed(machine("m2", owner="workers", namespace="other"))
    assert drain(runtime) == ([("other", "m2")], [("other", "workers")])
