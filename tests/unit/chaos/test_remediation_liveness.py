"""The liveness of a MachineHealthCheck remediation in the campaign (chaos/invariants.py
``remediation_awaits``): the Machine whose Node turned NotReady is deleted, then its
MachineSet has as many Machines with a Ready Node, other than it, as it asks for
(openshift/machine-api-operator pkg/controller/machinehealthcheck/
machinehealthcheck_controller.go ``internalRemediation`` deletes the Machine; the MachineSet
controller replaces it)."""

from __future__ import annotations

from typing import Any

from berthmaster.tooling.chaos import invariants as rules

SET = "pool-mhc"


def machine(name: str, node: str | None, deleting: bool = False, machine_set: str = SET
            ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "m",
                            "labels": {rules.MACHINESET_LABEL: machine_set}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"nodeRef": {"name": node}} if node else {}}


def of(*machines: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"m/{m['metadata']['name']}": m for m in machines}


def test_a_machine_not_yet_deleted_awaits_its_deletion() -> None:
    found = of(machine("a", "n-a"), machine("b", "n-b"))
    assert rules.remediation_awaits("m/a", found, SET, 2, {"n-b"}) == "deleted"


def test_a_deleted_machine_awaits_a_ready_replacement() -> None:
    ready = {"n-a", "n-b", "n-c"}
    deleting = of(machine("a", "n-a", deleting=True), machine("b", "n-b"))
    assert rules.remediation_awaits("m/a", deleting, SET, 2, ready) == \
        "replaced by a Ready Node"
    not_ready = of(machine("b", "n-b"), machine("c", "n-c"))
    assert rules.remediation_awaits("m/a", not_ready, SET, 2, {"n-b"}) == \
        "replaced by a Ready Node"
    other_set = of(machine("b", "n-b"), machine("c", "n-c", machine_set="pool-a"))
    assert rules.remediation_awaits("m/a", other_set, SET, 2, ready) == \
        "replaced by a Ready Node"
    no_node_yet = of(machine("b", "n-b"), machine("c", None))
    assert rules.remediation_awaits("m/a", no_node_yet, SET, 2, ready) == \
        "replaced by a Ready Node"


def test_done_once_gone_and_replaced() -> None:
    found = of(machine("b", "n-b"), machine("c", "n-c"))
    assert rules.remediation_awaits("m/a", found, SET, 2, {"n-b", "n-c"}) is None


def test_node_ready_reads_the_ready_condition() -> None:
    def node(status: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": "MemoryPressure", "status": "True"},
                                          {"type": "Ready", "status": status}]}}
    assert rules.node_ready(node("True"))
    assert not rules.node_ready(node("False")) and not rules.node_ready(node("Unknown"))
    assert not rules.node_ready(None) and not rules.node_ready({})
