"""A Machine whose status.nodeRef names a Node of another providerID neither drains nor deletes
it (a confused deputy otherwise: whoever may write a Machine's status could have the operator
cordon, evict and delete any Node).

Upstream's node link sets nodeRef only for the Node whose ``spec.providerID`` is the Machine's
(openshift/machine-api-operator pkg/controller/nodelink/nodelink_controller.go,
``findMachineFromNodeByProviderID``); its machine controller then drains and deletes by the
nodeRef name alone (pkg/controller/machine/controller.go, ``drainNode``, ``deleteNode``).
berthmaster checks the providerID again at both steps (operator/machines/nodes.py).
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.operator.machines import api
from tests.integration.conftest import NodeFactory
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    condition,
    get_machine,
    kwok_machine,
    machine_events,
    node_or_none,
    running_machine,
)
from tests.support.builders import for_create, make_pod
from tests.support.waiting import wait_for


async def test_a_node_of_another_provider_id_is_neither_drained_nor_deleted(
        kube: KubeClient, namespace: str, operator: OperatorProcess, nodes: NodeFactory,
        cleanup_nodes: list[str]) -> None:
    victim = await nodes.create(name=f"{namespace}-victim")
    victim_name = victim["metadata"]["name"]
    await kube.patch(api.node_path(victim_name),
                     {"spec": {"providerID": "kind://docker/tenant/victim"}})
    await kube.create(resource_path(CORE, "pods", namespace),
                      for_create(make_pod("bystander", node_name=victim_name, image="busybox")))
    name = f"{namespace}-m"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace),
                      kwok_machine(name, pre_drain=[("Hold", "the-test")],
                                  pre_terminate=[("Look", "the-test")]))
    machine = await running_machine(kube, namespace, name)
    assert machine["status"]["nodeRef"]["name"] == name
    await kube.delete(api.machine_path(namespace, name))

    async def held() -> dict[str, Any] | None:
        found = await get_machine(kube, namespace, name)
        return found if condition(found, "Drainable").get("reason") == "HookPresent" else None

    machine = await wait_for(held, timeout=60, what="Drainable False (HookPresent)")
    # Someone allowed to write Machine status points the nodeRef at another Node.
    await kube.patch(api.machine_path(namespace, name, sub="status"), {"status": {
        "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": victim_name,
                    "uid": victim["metadata"]["uid"]}}})
    await kube.patch(api.machine_path(namespace, name),
                     [{"op": "remove", "path": "/spec/lifecycleHooks/preDrain"}], kind="json")

    async def deleted() -> bool:
        return await get_machine(kube, namespace, name) is None

    async def drained_condition() -> dict[str, Any] | None:
        found = condition(await get_machine(kube, namespace, name), "Drained")
        return found or None

    # The preTerminate hook holds the Machine after the drain step, to read its condition.
    drained = await wait_for(drained_condition, timeout=60, what="the Drained condition")
    assert (drained["status"], drained["reason"]) == ("True", "NodeNotOwned")
    assert "spec.providerID 'kind://docker/tenant/victim'" in drained["message"]
    events = await machine_events(kube, namespace, name)
    assert events["NodeNotOwned"]["type"] == "Warning"
    assert f"Node {victim_name!r} named by Machine" in events["NodeNotOwned"]["message"]
    assert "DrainProceeds" not in events
    await kube.patch(api.machine_path(namespace, name),
                     [{"op": "remove", "path": "/spec/lifecycleHooks/preTerminate"}], kind="json")
    await wait_for(deleted, timeout=90, what=f"machine {name} deleted")
    # The Machine is gone, every step done: the other Node was not touched.
    node = await node_or_none(kube, victim_name)
    assert node is not None and node["metadata"]["uid"] == victim["metadata"]["uid"]
    assert not node["spec"].get("unschedulable")
    bystander = await kube.get(resource_path(CORE, "pods", namespace, "bystander"))
    assert not bystander["metadata"].get("deletionTimestamp")
    # Its own instance (the kwok Node with its providerID) went the normal way.
    assert await node_or_none(kube, name) is None
