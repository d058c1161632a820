"""Beside another machine controller: a running operator leaves Machines it does not own alone.

The Machine API (and its finalizer name, ``machine.machine.openshift.io``) is shared by every
machine controller; upstream runs one controller per provider, each acting only on Machines whose
``providerSpec`` its actuator understands (machine-api-operator ``pkg/controller/machine``,
``Reconcile`` with the provider's actuator). berthmaster implements kwok only, so a Machine of
another provider (here the AWS ``AWSMachineProviderConfig``) gets nothing from it: no finalizer,
no status, no events, not when it is deleted either, and a MachineSet of another provider gets
no Machines. The label ``berthmaster.io/machine-controller: berthmaster`` opts a Machine in.

Ordering, not time, says the operator has seen the foreign objects: they are created first, then
a kwok Machine; that one reaching Running takes several reconciles, each queued after the
foreign objects' single one.
"""

from __future__ import annotations

import contextlib
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.operator.machines import api
from berthmaster.operator.machines.providers import CONTROLLER_LABEL, CONTROLLER_NAME
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    get_machine,
    kwok_machine,
    machine_events,
    running_machine,
)
from tests.support.waiting import wait_for

AWS_VALUE = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
             "instanceType": "m6i.xlarge", "placement": {"region": "eu-west-1"}}
# What the other controller already recorded; berthmaster must not overwrite it.
FOREIGN_STATUS = {"phase": "Running", "providerStatus": {"instanceState": "running"}}


def aws_machine(name: str, labels: dict[str, str] | None = None,
                finalizers: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": api.API_VERSION, "kind": "Machine",
            "metadata": {"name": name, "labels": dict(labels or {}),
                         "finalizers": list(finalizers or [])},
            "spec": {"providerSpec": {"value": AWS_VALUE}}}


async def settle_with_a_kwok_machine(kube: KubeClient, namespace: str, name: str,
                                     cleanup_nodes: list[str]) -> None:
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    await running_machine(kube, namespace, name)


async def test_a_foreign_providers_machine_is_left_untouched(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    live, doomed = f"{namespace}-aws", f"{namespace}-aws-deleted"
    await kube.create(api.machine_path(namespace), aws_machine(live))
    status = await kube.replace(api.machine_path(namespace, live, "status"), {
        **(await kube.get(api.machine_path(namespace, live))), "status": FOREIGN_STATUS})
    before = status["status"]
    # Being deleted, with the other controller's finalizer (the same name as berthmaster's).
    await kube.create(api.machine_path(namespace), aws_machine(doomed, finalizers=[api.FINALIZER]))
    await kube.delete(api.machine_path(namespace, doomed))
    foreign_set = f"{namespace}-aws-set"
    selector = {"machine.openshift.io/cluster-api-machineset": foreign_set}
    await kube.create(api.machineset_path(namespace), {
        "apiVersion": api.API_VERSION, "kind": "MachineSet", "metadata": {"name": foreign_set},
        "spec": {"replicas": 2, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": selector},
                              "spec": {"providerSpec": {"value": AWS_VALUE}}}}})
    try:
        await settle_with_a_kwok_machine(kube, namespace, f"{namespace}-kwok", cleanup_nodes)

        machine = await get_machine(kube, namespace, live)
        assert machine is not None
        assert machine["metadata"].get("finalizers") in (None, [])
        assert machine["status"] == before
        assert "annotations" not in machine["metadata"] or (
            api.INSTANCE_STATE not in machine["metadata"]["annotations"])
        assert await machine_events(kube, namespace, live) == {}

        deleting = await get_machine(kube, namespace, doomed)
        assert deleting is not None, "berthmaster removed another controller's finalizer"
        assert deleting["metadata"]["finalizers"] == [api.FINALIZER]
        assert "status" not in deleting
        assert await machine_events(kube, namespace, doomed) == {}

        machines, _ = await kube.list_all(api.machine_path(namespace))
        assert sorted(m["metadata"]["name"] for m in machines) == sorted(
            [live, doomed, f"{namespace}-kwok"]), "berthmaster scaled a foreign MachineSet"
        machine_set = await kube.get(api.machineset_path(namespace, foreign_set))
        assert "status" not in machine_set or not machine_set["status"].get("errorReason")
    finally:
        with contextlib.suppress(KubeError):
            await kube.patch(api.machine_path(namespace, doomed),
                             {"metadata": {"finalizers": []}})


async def test_the_label_opts_a_machine_in(
        kube: KubeClient, namespace: str, operator: OperatorProcess) -> None:
    """Opted in, a Machine of a provider berthmaster lacks is reconciled, so it learns why
    nothing happens: phase Failed, InvalidConfiguration, naming the kinds it supports."""
    name = f"{namespace}-aws-mine"
    await kube.create(api.machine_path(namespace),
                      aws_machine(name, labels={CONTROLLER_LABEL: CONTROLLER_NAME}))

    async def failed() -> dict[str, Any] | None:
        machine = await get_machine(kube, namespace, name)
        return machine if (machine or {}).get("status", {}).get("phase") == "Failed" else None

    machine = await wait_for(failed, timeout=60, what="opted-in machine Failed")
    assert machine["status"]["errorReason"] == api.INVALID_CONFIGURATION
    assert machine["status"]["errorMessage"] == (
        f"Machine {name}: spec.providerSpec.value.kind 'AWSMachineProviderConfig' is not "
        "supported by berthmaster; use one of: KwokMachineProviderSpec")
    await kube.delete(api.machine_path(namespace, name))
    await wait_for(lambda: _gone(kube, namespace, name), timeout=60, what="machine deleted")


async def _gone(kube: KubeClient, namespace: str, name: str) -> bool:
    return await get_machine(kube, namespace, name) is None
