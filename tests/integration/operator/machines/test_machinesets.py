"""MachineSets on a real control plane: replicas, the scale subresource, delete policies, the
delete-machine annotation, template taints reaching Nodes, orphan adoption, and refused
invalid specs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.operator.machines import api
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.operator.machines.conftest import OperatorProcess, kwok_machine
from tests.support.waiting import wait_for

TAINT = {"key": "key1", "value": "value1", "effect": "NoExecute"}


def machineset(name: str, replicas: int, policy: str | None = None) -> dict[str, Any]:
    labels = {api.MACHINESET_LABEL: name}
    template = kwok_machine("unused", taints=[TAINT])
    spec: dict[str, Any] = {
        "replicas": replicas, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}
    if policy:
        spec["deletePolicy"] = policy
    return {"apiVersion": api.API_VERSION, "kind": "MachineSet", "metadata": {"name": name},
            "spec": spec}


async def machines_of(kube: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    items, _ = await kube.list_all(api.machine_path(namespace),
                                   labelSelector=f"{api.MACHINESET_LABEL}={name}")
    return sorted(items, key=lambda m: m["metadata"]["creationTimestamp"])


async def settle(kube: KubeClient, namespace: str, name: str, replicas: int
                 ) -> list[dict[str, Any]]:
    """Wait for exactly ``replicas`` Running Machines (and no others) and a matching status."""
    async def settled() -> tuple[list[dict[str, Any]]] | None:
        machines = await machines_of(kube, namespace, name)
        ms = await kube.get(api.machineset_path(namespace, name))
        running = [m for m in machines if (m.get("status") or {}).get("phase") == "Running"]
        status = ms.get("status") or {}
        if (len(machines) == replicas == len(running) and status.get("replicas") == replicas
                and status.get("readyReplicas", 0) == replicas):
            return (machines,)  # a tuple: truthy even when no Machines are wanted
        return None

    found = await wait_for(settled, timeout=90, what=f"MachineSet {name} at {replicas} replicas")
    return found[0]


async def scale(kube: KubeClient, namespace: str, name: str, replicas: int) -> None:
    await kube.patch(api.machineset_path(namespace, name, "scale"),
                     {"spec": {"replicas": replicas}})


async def remove_all(kube: KubeClient, namespace: str, name: str) -> None:
    await scale(kube, namespace, name, 0)
    await settle(kube, namespace, name, 0)


def names(machines: list[dict[str, Any]]) -> list[str]:
    return [m["metadata"]["name"] for m in machines]


async def test_scale_up_and_down_with_taints_on_nodes(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        machine_api: RunningCluster) -> None:
    name = f"{namespace}-w"
    await kube.create(api.machineset_path(namespace), machineset(name, 2))
    machines = await settle(kube, namespace, name, 2)
    for machine in machines:
        assert machine["metadata"]["generateName"] == f"{name}-"
        assert machine["metadata"]["ownerReferences"][0]["kind"] == "MachineSet"
        node = await kube.get(api.node_path(machine["status"]["nodeRef"]["name"]))
        assert TAINT in node["spec"]["taints"]

    # A taint removed from a Node by hand comes back; a taint added by hand stays.
    node_name = machines[0]["status"]["nodeRef"]["name"]
    await kube.patch(api.node_path(node_name), {"spec": {"taints": [
        {"key": "by-hand", "effect": "NoSchedule"}]}})

    async def taints_conform() -> bool:
        taints = (await kube.get(api.node_path(node_name)))["spec"].get("taints") or []
        keys = {t["key"] for t in taints}
        return {"key1", "by-hand"} <= keys
    await wait_for(taints_conform, timeout=30, what="template taint back beside the hand one")

    # kubectl scale goes through the scale subresource.
    result = machine_api.kubectl("scale", "machineset", name, "-n", namespace, "--replicas=3")
    assert result.returncode == 0, result.stderr
    await settle(kube, namespace, name, 3)
    scale_view = await kube.get(api.machineset_path(namespace, name, "scale"))
    assert scale_view["status"] == {"replicas": 3,
                                    "selector": f"{api.MACHINESET_LABEL}={name}"}
    table = machine_api.kubectl("get", "machinesets,machines", "-n", namespace)
    assert table.returncode == 0
    assert "DESIRED" in table.stdout and "PHASE" in table.stdout and "Running" in table.stdout
    await scale(kube, namespace, name, 1)
    await settle(kube, namespace, name, 1)
    await remove_all(kube, namespace, name)


@pytest.mark.parametrize("policy", ["Oldest", "Newest"])
async def test_age_delete_policies(kube: KubeClient, namespace: str, operator: OperatorProcess,
                                   policy: str) -> None:
    name = f"{namespace}-{policy.lower()}"
    await kube.create(api.machineset_path(namespace), machineset(name, 1, policy))
    first = names(await settle(kube, namespace, name, 1))
    await asyncio.sleep(1.2)  # creationTimestamp has one-second resolution
    await scale(kube, namespace, name, 2)
    both = names(await settle(kube, namespace, name, 2))
    second = [n for n in both if n not in first]
    await scale(kube, namespace, name, 1)
    kept = names(await settle(kube, namespace, name, 1))
    assert kept == (second if policy == "Oldest" else first)
    await remove_all(kube, namespace, name)


async def test_an_orphan_machine_is_adopted(kube: KubeClient, namespace: str,
                                            operator: OperatorProcess) -> None:
    """A Machine matching a MachineSet's selector with no controller is adopted, brought back
    by its own event (a MachineSet at rest is not resynced on a timer): upstream's
    MachineToMachineSets and adoptOrphan (openshift/machine-api-operator
    pkg/controller/machineset/controller.go)."""
    name = f"{namespace}-adopt"
    await kube.create(api.machineset_path(namespace), machineset(name, 1))
    await settle(kube, namespace, name, 1)
    stray = kwok_machine(f"{name}-stray", labels={api.MACHINESET_LABEL: name})
    await kube.create(api.machine_path(namespace), stray)
    kept = await settle(kube, namespace, name, 1)  # adopted, then one too many: one deleted
    ms = await kube.get(api.machineset_path(namespace, name))
    assert [r["uid"] for r in kept[0]["metadata"]["ownerReferences"]] == [
        ms["metadata"]["uid"]]
    await remove_all(kube, namespace, name)


@pytest.mark.parametrize("policy", ["Random", "Oldest", "Newest"])
async def test_delete_machine_annotation_goes_first(
        kube: KubeClient, namespace: str, operator: OperatorProcess, policy: str) -> None:
    name = f"{namespace}-{policy.lower()}"
    await kube.create(api.machineset_path(namespace), machineset(name, 3, policy))
    machines = await settle(kube, namespace, name, 3)
    chosen = machines[1]["metadata"]["name"]
    await kube.patch(api.machine_path(namespace, chosen), {"metadata": {"annotations": {
        api.DELETE_MACHINE: "true"}}})
    await scale(kube, namespace, name, 2)
    kept = names(await settle(kube, namespace, name, 2))
    assert chosen not in kept
    await remove_all(kube, namespace, name)


async def test_invalid_specs_are_refused(kube: KubeClient, namespace: str,
                                         machine_api: RunningCluster) -> None:
    def with_hooks(hooks: list[dict[str, str]]) -> dict[str, Any]:
        body = kwok_machine(f"{namespace}-bad")
        body["spec"]["lifecycleHooks"] = {"preDrain": hooks}
        return body

    cases = [
        (with_hooks([{"name": "no spaces allowed", "owner": "someone"}]),
         "spec.lifecycleHooks.preDrain[0].name: Invalid value"),
        (with_hooks([{"name": "ab", "owner": "someone"}]),
         "spec.lifecycleHooks.preDrain[0].name: Invalid value: \"ab\": spec.lifecycleHooks."
         "preDrain[0].name in body should be at least 3 chars long"),
        (with_hooks([{"name": "Valid", "owner": "me"}]),
         "spec.lifecycleHooks.preDrain[0].owner in body should be at least 3 chars long"),
        (with_hooks([{"name": "Same", "owner": "one"}, {"name": "Same", "owner": "two"}]),
         "spec.lifecycleHooks.preDrain[1]: Duplicate value"),
        (with_hooks([{"name": "NoOwner"}]),
         "spec.lifecycleHooks.preDrain[0].owner: Required value"),
    ]
    for body, message in cases:
        with pytest.raises(KubeError) as refused:
            await kube.create(api.machine_path(namespace), body)
        assert refused.value.status == 422
        assert message in refused.value.message, refused.value.message

    bad_set = machineset(f"{namespace}-bad", 1)
    bad_set["spec"]["template"]["metadata"]["labels"] = {"other": "label"}
    with pytest.raises(KubeError) as refused:
        await kube.create(api.machineset_path(namespace), bad_set)
    assert "`selector` does not match template `labels`" in refused.value.message
    bad_policy = machineset(f"{namespace}-bad", 1, "Smallest")
    with pytest.raises(KubeError) as refused:
        await kube.create(api.machineset_path(namespace), bad_policy)
    assert 'spec.deletePolicy: Unsupported value: "Smallest"' in refused.value.message


async def test_invalid_provider_spec_fails_the_machine(
        kube: KubeClient, namespace: str, operator: OperatorProcess) -> None:
    body = kwok_machine(f"{namespace}-cfg")
    body["spec"]["providerSpec"]["value"]["capacity"] = {"cpu": "lots"}
    await kube.create(api.machine_path(namespace), body)

    async def failed() -> dict[str, Any] | None:
        machine = await kube.get(api.machine_path(namespace, f"{namespace}-cfg"))
        return machine if (machine.get("status") or {}).get("phase") == "Failed" else None

    machine = await wait_for(failed, timeout=30, what="machine Failed")
    assert machine["status"]["errorReason"] == "InvalidConfiguration"
    assert machine["status"]["errorMessage"] == (
        f"Machine {namespace}-cfg: spec.providerSpec.value.capacity.cpu: 'lots' is not a "
        "quantity; write it like 4, 500m, 16Gi or 1e3")
    # machine-api-operator controller.go, patchFailedMachineInstanceAnnotation
    assert machine["metadata"]["annotations"][api.INSTANCE_STATE] == "Unknown"
    await kube.delete(api.machine_path(namespace, f"{namespace}-cfg"))

    async def gone() -> bool:
        try:
            await kube.get(api.machine_path(namespace, f"{namespace}-cfg"))
        except KubeError as error:
            return error.not_found
        return False
    await wait_for(gone, timeout=30, what="failed machine deleted")
