"""Which API is authoritative for a Machine: ``spec`` and ``status.authoritativeAPI``.

Upstream (openshift/api machine/v1beta1 types_machine.go ``MachineAuthority``; machine-api-operator
pkg/controller/machine/controller.go ``Reconcile``, with the MachineAPIMigration feature gate on,
as berthmaster always behaves): before anything else,

- an empty ``status.authoritativeAPI`` is first set to ``spec.authoritativeAPI`` (the CRD
  defaults that to ``MachineAPI``), and the reconcile ends there;
- ``ClusterAPI`` or ``Migrating``: the Machine is paused: condition ``Paused`` True, reason
  ``AuthoritativeAPINotMachineAPI``, message ``The AuthoritativeAPI status is set to '<value>'``,
  and nothing else is done (not even a deletion: the other API's controller owns it);
- ``MachineAPI``: ``Paused`` False, severity Info, reason ``AuthoritativeAPIMachineAPI``, the
  same message, and the reconcile goes on;
- any other value is logged as invalid and the Machine is left alone.

Pure: :func:`decide` says what the controller does; the controller writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from berthmaster.operator.machines.conditions import Condition, false_condition

MACHINE_API = "MachineAPI"
CLUSTER_API = "ClusterAPI"
MIGRATING = "Migrating"
PAUSED = "Paused"
PAUSED_REASON = "AuthoritativeAPINotMachineAPI"
NOT_PAUSED_REASON = "AuthoritativeAPIMachineAPI"
SEVERITY_INFO = "Info"


@dataclass(frozen=True)
class Authority:
    """``set_status``: the value to write to ``status.authoritativeAPI`` (then stop);
    ``condition``: the Paused condition wanted; ``proceed``: reconcile the Machine further;
    ``invalid``: the unknown value found."""

    set_status: str | None = None
    condition: Condition | None = None
    proceed: bool = False
    invalid: str | None = None


def message(value: str) -> str:
    return f"The AuthoritativeAPI status is set to '{value}'"


def decide(obj: dict[str, Any]) -> Authority:
    value = str((obj.get("status") or {}).get("authoritativeAPI") or "")
    if not value:
        return Authority(set_status=str((obj.get("spec") or {}).get("authoritativeAPI") or ""))
    if value in (CLUSTER_API, MIGRATING):
        return Authority(condition={"type": PAUSED, "status": "True", "reason": PAUSED_REASON,
                                    "message": message(value)})
    if value == MACHINE_API:
        return Authority(condition=false_condition(PAUSED, NOT_PAUSED_REASON, message(value),
                                                   severity=SEVERITY_INFO), proceed=True)
    return Authority(invalid=value)
