"""The Node a Machine links to carries the Machine's ``spec.metadata`` on a real control plane.

machine-api-operator pkg/controller/nodelink/nodelink_controller.go ``Reconcile``: the link
annotation, then ``spec.metadata.annotations`` and ``spec.metadata.labels`` copied onto the
Node (set or overwritten); a key later dropped from the Machine is not removed from the Node.
Ordering, not time, shows the dropped key stays: it is checked once a later change has reached
the Node.
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.machines import api
from tests.integration.operator.machines.conftest import (
    OperatorProcess,
    kwok_machine,
    node_or_none,
    running_machine,
)
from tests.support.waiting import wait_for


async def node_carrying(kube: KubeClient, name: str, annotations: dict[str, str],
                        labels: dict[str, str]) -> dict[str, Any]:
    async def carries() -> dict[str, Any] | None:
        node = await node_or_none(kube, name)
        meta = (node or {}).get("metadata") or {}
        if annotations.items() <= (meta.get("annotations") or {}).items() \
                and labels.items() <= (meta.get("labels") or {}).items():
            return node
        return None
    return await wait_for(carries, timeout=60, what=f"node {name} with {annotations} {labels}")


async def test_spec_metadata_annotations_and_labels_reach_the_node(
        kube: KubeClient, namespace: str, operator: OperatorProcess,
        cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-linked"
    cleanup_nodes.append(name)
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    await running_machine(kube, namespace, name)
    await kube.patch(api.machine_path(namespace, name), {"spec": {"metadata": {
        "annotations": {"example.com/rack": "r1"}, "labels": {"example.com/pool": "a"}}}})
    await node_carrying(kube, name, {"example.com/rack": "r1",
                                     api.NODE_MACHINE: f"{namespace}/{name}"},
                        {"example.com/pool": "a"})
    await kube.patch(api.machine_path(namespace, name), {"spec": {"metadata": {
        "annotations": {"example.com/rack": None, "example.com/row": "7"},
        "labels": {"example.com/pool": None, "example.com/zone": "z"}}}})
    node = await node_carrying(kube, name, {"example.com/row": "7"}, {"example.com/zone": "z"})
    assert node["metadata"]["annotations"]["example.com/rack"] == "r1"
    assert node["metadata"]["labels"]["example.com/pool"] == "a"
