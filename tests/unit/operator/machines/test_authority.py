"""The authoritativeAPI switch, as machine-api-operator pkg/controller/machine/controller.go
``Reconcile`` takes it (PausedCondition, reasons AuthoritativeAPINotMachineAPI and
AuthoritativeAPIMachineAPI; openshift/api machine/v1beta1 ``MachineAuthority``)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.machines.authority import Authority, decide


def machine(spec: str | None, status: str | None) -> dict[str, Any]:
    return {"spec": {"authoritativeAPI": spec} if spec else {},
            "status": {"authoritativeAPI": status} if status else {}}


@pytest.mark.parametrize(("obj", "wanted"), [
    (machine("ClusterAPI", None), Authority(set_status="ClusterAPI")),
    (machine("MachineAPI", None), Authority(set_status="MachineAPI")),
    (machine("ClusterAPI", "ClusterAPI"), Authority(condition={
        "type": "Paused", "status": "True", "reason": "AuthoritativeAPINotMachineAPI",
        "message": "The AuthoritativeAPI status is set to 'ClusterAPI'"})),
    (machine("MachineAPI", "Migrating"), Authority(condition={
        "type": "Paused", "status": "True", "reason": "AuthoritativeAPINotMachineAPI",
        "message": "The AuthoritativeAPI status is set to 'Migrating'"})),
    (machine("MachineAPI", "MachineAPI"), Authority(condition={
        "type": "Paused", "status": "False", "severity": "Info",
        "reason": "AuthoritativeAPIMachineAPI",
        "message": "The AuthoritativeAPI status is set to 'MachineAPI'"}, proceed=True)),
    (machine("MachineAPI", "Other"), Authority(invalid="Other")),
])
def test_decide(obj: dict[str, Any], wanted: Authority) -> None:
    assert decide(obj) == wanted
