"""``authoritativeAPI`` on a real control plane: kept by the CRD schema, honoured as upstream.

openshift/api machine/v1beta1 types_machine.go: ``spec.authoritativeAPI`` (MachineAPI or
ClusterAPI, default MachineAPI) and ``status.authoritativeAPI`` (also Migrating; never straight
from MachineAPI to ClusterAPI). machine-api-operator pkg/controller/machine/controller.go
``Reconcile``: an empty status takes the spec's value; ClusterAPI or Migrating pauses the
Machine (``Paused`` True, reason ``AuthoritativeAPINotMachineAPI``) and nothing else is done;
MachineAPI sets ``Paused`` False (reason ``AuthoritativeAPIMachineAPI``) and goes on.
A paused Machine getting nothing is shown by ordering: the Paused condition is the last write
the controller makes to it, so once it is there the finalizer (upstream's next step) is absent.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    node_or_none,
    running_machine,
)
from tests.integration.operator.machines.test_healthchecks import workers
from tests.support.waiting import wait_for


async def paused(kube: KubeClient, namespace: str, name: str, status: str) -> dict[str, Any]:
    async def has_it() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        return machine if condition(machine, "Paused").get("status") == status else None
    return await wait_for(has_it, timeout=60, what=f"machine {name} Paused={status}")


async def test_machine_api_machine_is_not_paused_and_runs(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-mapi"
    cleanup_nodes.append(name)
    created = await kube.create(api.machine_path(namespace), kwok_machine(name))
    assert created["spec"]["authoritativeAPI"] == "MachineAPI"  # the CRD's default
    machine = await running_machine(kube, namespace, name)
    assert machine["status"]["authoritativeAPI"] == "MachineAPI"
    found = condition(machine, "Paused")
    assert {k: found.get(k) for k in ("status", "severity", "reason", "message")} == {
        "status": "False", "severity": "Info", "reason": "AuthoritativeAPIMachineAPI",
        "message": "The AuthoritativeAPI status is set to 'MachineAPI'"}
    with pytest.raises(KubeError) as refused:
        await kube.patch(api.machine_path(namespace, name, sub="status"),
                         {"status": {"authoritativeAPI": "ClusterAPI"}})
    assert refused.value.status == 422
    assert ("The authoritativeAPI field must not transition directly from MachineAPI to "
            "ClusterAPI or vice versa. It must transition through Migrating.") \
        in refused.value.message
    await kube.patch(api.machine_path(namespace, name, sub="status"),
                     {"status": {"authoritativeAPI": "Migrating"}})
    machine = await paused(kube, namespace, name, "True")
    assert condition(machine, "Paused")["message"] == \
        "The AuthoritativeAPI status is set to 'Migrating'"


async def test_cluster_api_machine_is_paused_and_left_alone(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-capi"
    cleanup_nodes.append(name)
    body = kwok_machine(name)
    body["spec"]["authoritativeAPI"] = "ClusterAPI"
    await kube.create(api.machine_path(namespace), body)
    machine = await paused(kube, namespace, name, "True")
    assert machine["spec"]["authoritativeAPI"] == "ClusterAPI"
    assert machine["status"]["authoritativeAPI"] == "ClusterAPI"
    found = condition(machine, "Paused")
    assert (found["reason"], found["message"]) == (
        "AuthoritativeAPINotMachineAPI", "The AuthoritativeAPI status is set to 'ClusterAPI'")
    assert api.FINALIZER not in (machine["metadata"].get("finalizers") or [])
    assert not machine["status"].get("phase")
    assert await node_or_none(kube, name) is None


async def test_cluster_api_machineset_is_paused_and_makes_no_machines(
        kube: KubeClient, namespace: str, operator: OperatorProcess) -> None:
    """machine-api-operator pkg/controller/machineset/controller.go ``Reconcile``: the same
    switch for a MachineSet; paused, it creates no Machines (checked once a MachineSet created
    after it has been fully reconciled, so the paused one had its turns first)."""
    paused_set = workers("capi-set", 2)
    paused_set["spec"]["authoritativeAPI"] = "ClusterAPI"
    await kube.create(api.machineset_path(namespace), paused_set)

    async def set_paused() -> dict[str, Any] | None:
        found = await kube.get(api.machineset_path(namespace, "capi-set"))
        return found if condition(found, "Paused").get("status") == "True" else None

    found = await wait_for(set_paused, timeout=60, what="MachineSet capi-set Paused=True")
    assert found["status"]["authoritativeAPI"] == "ClusterAPI"
    assert (condition(found, "Paused")["reason"], condition(found, "Paused")["message"]) == (
        "AuthoritativeAPINotMachineAPI", "The AuthoritativeAPI status is set to 'ClusterAPI'")
    running = await kube.create(api.machineset_path(namespace), workers("mapi-set", 0))
    assert running["spec"]["authoritativeAPI"] == "MachineAPI"

    async def set_not_paused() -> dict[str, Any] | None:
        found = await kube.get(api.machineset_path(namespace, "mapi-set"))
        return found if condition(found, "Paused").get("reason") == \
            "AuthoritativeAPIMachineAPI" and "replicas" in (found.get("status") or {}) else None

    await wait_for(set_not_paused, timeout=60, what="MachineSet mapi-set Paused=False, reconciled")
    machines, _ = await kube.list_all(api.machine_path(namespace))
    assert machines == []
