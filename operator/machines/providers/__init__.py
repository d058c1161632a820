"""The provider API: the actuator contract every Machine provider implements.

A provider makes and removes the instance behind a Machine. It is machine-api-operator's
``Actuator`` (openshift/machine-api-operator pkg/controller/machine/actuator.go: Create, Exists,
Update, Delete, all idempotent) in Python, driven by :class:`~..controller.MachineController`
as upstream's ``Reconcile`` drives the actuator (pkg/controller/machine/controller.go):

- ``instance_exists(machine)``: the Machine's instance, or None when there is none. Called on
  every reconcile; an instance the provider considers gone (for AWS, a terminated one) is None.
  A Machine that has a ``spec.providerID`` but no instance goes Failed ("can't find created
  instance"), as upstream's does when an instance is deleted outside the Machine API.
- ``update_instance(machine, instance)``: called when the instance exists (upstream's Update);
  corrects drift on the instance (its tags) and returns what the Machine records.
- ``create_instance(machine)``: called once the Machine is ``Provisioning`` and no instance
  exists; creating again must find the first instance, never make a second one.
- ``delete_instance(machine)``: after the preTerminate hooks are gone; deleting an instance
  that is already gone succeeds. The controller then waits until ``instance_exists`` is None.
- ``validate(machine)``: every problem with the providerSpec, each naming the field and the fix.

Errors, as upstream's controller sorts them:
- :class:`InvalidProviderSpec` is terminal (upstream's ``InvalidMachineConfiguration``,
  ``MachineError`` with reason ``InvalidConfiguration``): the Machine goes ``Failed`` with
  ``errorReason: InvalidConfiguration``, a ``FailedCreate`` Warning event and the condition
  ``InstanceExists=False``; nothing is retried and nothing is deleted.
- :class:`RequeueAfter` is "not yet" (upstream's ``RequeueAfterError``): the reconcile ends
  without error and runs again after ``delay`` seconds.
- any other exception is retried with the work queue's backoff (upstream returns the error);
  when ``instance_exists`` raised it, ``InstanceExists`` is ``Unknown`` (ErrorCheckingProvider).

What the Machine records (:class:`Instance`): ``spec.providerID`` (a provider's own scheme:
``kwok://<namespace>/<name>``, ``aws:///<zone>/<instance-id>``), ``status.addresses`` (Node
address types: InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname), labels and
annotations for the Machine (instance type, region, zone; ``machine.openshift.io/instance-state``)
and ``status.providerStatus``.

How a Node is matched to its Machine: by ``spec.providerID``, as upstream's nodelink controller
does. A provider that knows the Node's name (kwok) returns it in ``Instance.node_name``; otherwise
the controller looks for the Node whose ``spec.providerID`` is the instance's. A Node whose
providerID is not the Machine's is never drained or deleted for it (:mod:`..nodes`).

Loading: providers are classes registered under the entry-point group
``berthmaster.machine_providers`` (:mod:`.registry`), named by the providerSpec ``kind`` they
implement; the kwok provider is registered so by berthmaster's own pyproject.toml. A provider
class has ``kind``, a short ``name`` for ``$BERTHMASTER_MACHINE_PROVIDERS``,
``enabled_by_default``, a constructor taking the operator's
:class:`~berthmaster.foundation.kube.KubeClient`,
and ``template_capacity(provider_spec)`` for the autoscaler's scale-from-zero. The
providers are documented in docs/providers.md.

Ownership: another machine controller may share the cluster (and the ``machine.openshift.io``
API, finalizer included). berthmaster reconciles only the Machines and MachineSets it owns
(:func:`owned`): a provider kind that is enabled, or the explicit opt-in label
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
    # The Node's name when the provider knows it; else the Node is found by providerID.
    node_name: str | None = None
    addresses: list[dict[str, str]] = field(default_factory=list)
    # Labels for the Machine itself (instance type, region, zone), as upstream's actuators set.
    machine_labels: dict[str, str] = field(default_factory=dict)
    # Annotations for the Machine (upstream's machine.openshift.io/instance-state).
    machine_annotations: dict[str, str] = field(default_factory=dict)
    # status.providerStatus, when the provider keeps one (AWSMachineProviderStatus).
    provider_status: dict[str, Any] | None = None


class InvalidProviderSpec(ValueError):
    """The providerSpec can never work as written (the message names the field and the fix):
    upstream's InvalidMachineConfiguration, terminal."""


class RequeueAfter(Exception):
    """Not an error: look again after ``delay`` seconds (upstream's RequeueAfterError)."""

    def __init__(self, delay: float, reason: str = ""):
        super().__init__(reason or f"requeue after {delay}s")
        self.delay = delay


class Provider(Protocol):
    """One provider's actuator (an instance of a provider class, see the module docstring)."""

    kind: str

    def validate(self, machine: dict[str, Any]) -> list[str]: ...

    async def create_instance(self, machine: dict[str, Any]) -> Instance: ...

    async def update_instance(self, machine: dict[str, Any], instance: Instance) -> Instance: ...

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
