"""Which Machines and MachineSets berthmaster reconciles (providers.owned): its own provider
kinds, or the explicit opt-in label; never another machine controller's."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.machines.providers import CONTROLLER_LABEL, owned

KINDS = {"KwokMachineProviderSpec"}


def machine(kind: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if kind is not None:
        spec["providerSpec"] = {"value": {"kind": kind}}
    return {"kind": "Machine", "metadata": {"name": "m", "labels": labels or {}}, "spec": spec}


def machine_set(kind: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = machine(kind)
    return {"kind": "MachineSet", "metadata": {"name": "ms", "labels": labels or {}},
            "spec": {"template": {"spec": template["spec"]}}}


@pytest.mark.parametrize(("obj", "expected"), [
    (machine("KwokMachineProviderSpec"), True),
    (machine("AWSMachineProviderConfig"), False),
    (machine(None), False),
    (machine(""), False),
    (machine("AWSMachineProviderConfig", {CONTROLLER_LABEL: "berthmaster"}), True),
    (machine(None, {CONTROLLER_LABEL: "berthmaster"}), True),
    (machine("AWSMachineProviderConfig", {CONTROLLER_LABEL: "machine-api"}), False),
    (machine_set("KwokMachineProviderSpec"), True),
    (machine_set("GCPMachineProviderSpec"), False),
    (machine_set("GCPMachineProviderSpec", {CONTROLLER_LABEL: "berthmaster"}), True),
    (machine_set(None), False),
], ids=["kwok", "aws", "no-providerSpec", "empty-kind", "aws-opted-in", "none-opted-in",
        "other-controller-label", "set-kwok", "set-gcp", "set-gcp-opted-in", "set-none"])
def test_owned(obj: dict[str, Any], expected: bool) -> None:
    assert owned(obj, KINDS) is expected
