"""docs/machines.md's lifecycle-hook example on a real control plane: one preDrain hook and three
preTerminate hooks hold a Machine's deletion at each stage until their owners remove them."""

from __future__ import annotations

import asyncio

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    node_or_none,
    running_machine,
    set_hooks,
)
from tests.support.builders import for_create, make_pod
from tests.support.waiting import wait_for

PRE_DRAIN = [("MigrateImportantApp", "my-app-migration-controller")]
PRE_TERMINATE = [("BackupFileSystem", "my-backup-controller"),
                 ("CloudProviderSpecialCase", "my-custom-storage-detach-controller"),
                 ("WaitForStorageDetach", "my-custom-storage-detach-controller")]


def bare_pod(name: str, node: str) -> dict:
    return for_create(make_pod(name, node_name=node, image="busybox",
                               volumes=[{"name": "scratch", "emptyDir": {}}]))


async def test_seed_example_held_at_each_stage(kube: KubeClient, namespace: str,
                                              operator: OperatorProcess,
                                              cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-worker"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(
        name, pre_drain=PRE_DRAIN, pre_terminate=PRE_TERMINATE,
        taints=[{"key": "key1", "value": "value1", "effect": "NoExecute"}]))
    machine = await running_machine(kube, namespace, name)

    # Running: a kwok Node linked to the Machine, with its labels and taints.
    assert machine["metadata"]["finalizers"] == [api.FINALIZER]
    assert machine["spec"]["providerID"] == f"kwok://{namespace}/{name}"
    assert machine["metadata"]["labels"]["machine.openshift.io/instance-type"] == "kwok.small"
    assert machine["status"]["nodeRef"]["name"] == name
    node = await kube.get(api.node_path(name))
    assert node["metadata"]["annotations"]["machine.openshift.io/machine"] == f"{namespace}/{name}"
    assert node["metadata"]["labels"]["machine.openshift.io/machine"] == name
    assert "node-role.kubernetes.io/worker" in node["metadata"]["labels"]
    assert {"key": "key1", "value": "value1", "effect": "NoExecute"} in node["spec"]["taints"]
    assert condition(machine, "Drainable") == {
        **condition(machine, "Drainable"), "status": "False", "reason": "HookPresent",
        "message": "Drain operation currently blocked by: "
                   "[{Name:MigrateImportantApp Owner:my-app-migration-controller}]"}
    assert condition(machine, "Terminable")["message"] == (
        "Terminate operation currently blocked by: [{Name:BackupFileSystem "
        "Owner:my-backup-controller} {Name:CloudProviderSpecialCase "
        "Owner:my-custom-storage-detach-controller} {Name:WaitForStorageDetach "
        "Owner:my-custom-storage-detach-controller}]")

    # A workload on the Node (tolerating the machine's taint) with emptyDir scratch data.
    pod = bare_pod("app", name)
    pod["spec"]["tolerations"] = [{"key": "key1", "operator": "Exists"}]
    await kube.create(resource_path(CORE, "pods", namespace), pod)

    # Deleting: held before the drain by the preDrain hook.
    await kube.delete(api.machine_path(namespace, name))

    async def blocked() -> bool:
        return "DrainBlocked" in await machine_events(kube, namespace, name)

    await wait_for(blocked, timeout=30, what="DrainBlocked event")
    machine = await get_machine(kube, namespace, name)
    assert machine is not None and machine["status"]["phase"] == "Deleting"
    assert not condition(machine, "Drained")
    assert not (await kube.get(api.node_path(name)))["spec"].get("unschedulable")
    await asyncio.sleep(2)  # held: nothing moves while the hook is there
    assert await kube.get(resource_path(CORE, "pods", namespace, "app"))
    assert "DrainProceeds" not in await machine_events(kube, namespace, name)

    # Adding or changing a hook now is refused with upstream's message; removing is allowed.
    with pytest.raises(KubeError) as refused:
        await set_hooks(kube, namespace, name, "preDrain",
                        [*PRE_DRAIN, ("Sneaky", "someone-else")])
    assert refused.value.status in (403, 422)
    assert ("spec.lifecycleHooks.preDrain: Forbidden: pre-drain hooks are immutable when machine "
            "is marked for deletion: the following hooks are new or changed: "
            "[{Name:Sneaky Owner:someone-else}]") in refused.value.message

    # The migration controller is done: drain proceeds, evicts the pod, Drained True.
    await set_hooks(kube, namespace, name, "preDrain", [])

    async def drained() -> dict | None:
        found = await get_machine(kube, namespace, name)
        return found if condition(found, "Drained").get("status") == "True" else None

    machine = await wait_for(drained, timeout=60, what="Drained True")
    assert condition(machine, "Drained")["message"] == "Drain finished successfully"
    assert condition(machine, "Drainable")["status"] == "True"
    assert condition(machine, "Terminable")["reason"] == "HookPresent"
    node = await kube.get(api.node_path(name))
    assert node["spec"]["unschedulable"] is True
    with pytest.raises(KubeError) as gone:
        await kube.get(resource_path(CORE, "pods", namespace, "app"))
    assert gone.value.not_found
    reasons = await machine_events(kube, namespace, name)
    assert {"DrainBlocked", "DrainProceeds", "DrainSucceeded"} <= set(reasons)
    assert reasons["DrainSucceeded"]["message"] == "Node drain succeeded"
    assert reasons["DrainProceeds"]["message"] == "Node drain proceeds"

    # Held before termination by each preTerminate hook until the last one goes.
    remaining = list(PRE_TERMINATE)
    while len(remaining) > 1:
        remaining.pop(0)
        await set_hooks(kube, namespace, name, "preTerminate", remaining)
        await asyncio.sleep(2)
        machine = await get_machine(kube, namespace, name)
        assert machine is not None, "terminated while preTerminate hooks remained"
        assert condition(machine, "Terminable")["status"] == "False"
        assert await node_or_none(kube, name) is not None
        assert "instanceDeletedAt" not in machine["status"]["deletionProgress"]
    progress = machine["status"]["deletionProgress"]
    assert {"startedAt", "drainableAt", "drainStartedAt", "drainedAt"} <= set(progress)

    await set_hooks(kube, namespace, name, "preTerminate", [])

    async def machine_gone() -> bool:
        return await get_machine(kube, namespace, name) is None

    await wait_for(machine_gone, timeout=60, what="machine deleted")
    assert await node_or_none(kube, name) is None
