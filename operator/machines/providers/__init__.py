"""Infrastructure providers: where a Machine's instance comes from.

A provider answers three questions, all idempotent: create the instance for a Machine (again if
it exists: no second instance), delete it (again if it is gone: success), and say whether it
exists (returning what the Machine should record: providerID, addresses). The provider for a
Machine is chosen by ``spec.providerSpec.value.kind``; :func:`provider_for` names the supported
kinds when it meets another one.

Built in: ``kwok`` (``KwokMachineProviderSpec``), whose instances are kwok-managed fake Nodes, so
the whole Machine lifecycle runs on the local control plane and on kind with kwok installed.

Ownership: another machine controller may share the cluster (and the ``machine.openshift.io``
API, finalizer included). berthmaster reconciles only the Machines and MachineSets it owns
(:func:`owned`): a provider kind it implements, or the explicit opt-in label
``berthmaster.io/machine-controller: berthmaster``. Everything else is never written to: no
finalizer, no status, no events, not even on deletion.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Protocol

from berthmaster.operator.machines.api import UNKNOWN_INSTANCE_STATE


@dataclass(frozen=True)
class Instance:
    """What the Machine records about its instance."""

    provider_id: str
    node_name: str | None = None
    addresses: list[dict[str, str]] = field(default_factory=list)
    # Labels for the Machine itself (instance type, region, zone), as upstream's actuators set.
    machine_labels: dict[str, str] = field(default_factory=dict)


class InvalidProviderSpec(ValueError):
    """The providerSpec can never work as written (the message names the field and the fix)."""


class Provider(Protocol):
    kind: str

    def validate(self, machine: dict[str, Any]) -> list[str]: ...

    async def create_instance(self, machine: dict[str, Any]) -> Instance: ...

    async def delete_instance(self, machine: dict[str, Any]) -> None: ...

    async def instance_exists(self, machine: dict[str, Any]) -> Instance | None: ...


# The opt-in for a Machine or MachineSet whose provider kind berthmaster does not implement (or
# that names none): berthmaster then reconciles it, and reports the unsupported kind as Failed.
CONTROLLER_LABEL = "berthmaster.io/machine-controller"
CONTROLLER_NAME = "berthmaster"


def provider_spec_kind(machine: dict[str, Any]) -> str:
    value = ((machine.get("spec") or {}).get("providerSpec") or {}).get("value") or {}
    return str(value.get("kind") or "")


def owned(obj: dict[str, Any], kinds: Collection[str]) -> bool:
    """Whether berthmaster reconciles this Machine, or this MachineSet (judged by its template):
    its provider kind is one of ``kinds``, or it carries the opt-in label."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(CONTROLLER_LABEL) == CONTROLLER_NAME:
        return True
    if obj.get("kind") == "MachineSet":
        obj = ((obj.get("spec") or {}).get("template")) or {}
    return provider_spec_kind(obj) in kinds


def provider_for(machine: dict[str, Any], providers: dict[str, Provider]) -> Provider:
    kind = provider_spec_kind(machine)
    if kind in providers:
        return providers[kind]
    name = (machine.get("metadata") or {}).get("name")
    supported = ", ".join(sorted(providers))
    if not kind:
        raise InvalidProviderSpec(f"Machine {name}: spec.providerSpec.value.kind is not set; "
                                  f"set it to one of: {supported}")
    raise InvalidProviderSpec(f"Machine {name}: spec.providerSpec.value.kind {kind!r} is not "
                              f"supported by berthmaster; use one of: {supported}")


# The fields providers record the instance's state in: AWS, GCP and vSphere, and Azure.
INSTANCE_STATE_FIELDS = ("instanceState", "vmState")


def unknown_instance_state(provider_status: dict[str, Any] | None) -> dict[str, Any] | None:
    """``status.providerStatus`` of a Machine gone Failed: a recorded instance state becomes
    ``Unknown`` (the instance's fate is unknown); None when there is nothing to change."""
    if not provider_status:
        return None
    changed = {field: UNKNOWN_INSTANCE_STATE for field in INSTANCE_STATE_FIELDS
               if isinstance(provider_status.get(field), str)
               and provider_status[field] != UNKNOWN_INSTANCE_STATE}
    return {**provider_status, **changed} if changed else None
