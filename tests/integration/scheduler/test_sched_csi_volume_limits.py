"""MaxCSIVolumeCountPred on the real API server: a CSINode's per-driver count is honoured.

A kwok node gets a CSINode allowing one volume of a test CSI driver; two PVs of that driver are
bound to two claims. The binding is written the way the PV binder leaves it, without waiting
for the one the local control plane runs: the PV names its claim (``claimRef``), the claim
names its PV (``volumeName``), and both report ``Bound`` through their status subresource.
The scheduler runs with a Policy listing the predicate (the default policy does not).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.policy import load_policy
from tests.integration.scheduler.schedkit import create_pod, events_for, make_pod, node_of
from tests.support.waiting import wait_for

STORAGE = group_path("storage.k8s.io", "v1")
REASON = "node(s) exceed max volume count"
POLICY = """
kind: Policy
apiVersion: v1
predicates:
- name: GeneralPredicates
- name: PodToleratesNodeTaints
- name: MaxCSIVolumeCountPred
priorities:
- {name: LeastRequestedPriority, weight: 1}
"""


class Volumes:
    """CSINodes, PVs and claims made by one test, removed (finalizers and all) after it."""

    def __init__(self, kube: KubeClient, namespace: str, driver: str):
        self.kube = kube
        self.namespace = namespace
        self.driver = driver
        self.made: list[str] = []  # API paths, deleted in reverse order

    async def csi_node(self, node: str, count: int) -> None:
        body = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": node},
                "spec": {"drivers": [{"name": self.driver, "nodeID": node,
                                      "allocatable": {"count": count}}]}}
        await self.kube.create(resource_path(STORAGE, "csinodes"), body)
        self.made.append(resource_path(STORAGE, "csinodes", name=node))

    async def delete_csi_node(self, node: str) -> None:
        path = resource_path(STORAGE, "csinodes", name=node)
        await self.kube.delete(path)

        async def gone() -> bool:
            try:
                await self.kube.get(path)
            except KubeError as error:
                return error.not_found
            return False

        await wait_for(gone, timeout=30, what=f"CSINode {node} deleted")

    async def bound_claim(self, claim: str, handle: str) -> None:
        """A PV of the driver with ``handle``, and ``claim`` bound to it (both Bound)."""
        pv_name = f"{self.namespace}-{claim}"
        pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
              "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                       "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                       "csi": {"driver": self.driver, "volumeHandle": handle},
                       "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                    "namespace": self.namespace, "name": claim}}}
        await self.kube.create(resource_path(CORE, "persistentvolumes"), pv)
        self.made.append(resource_path(CORE, "persistentvolumes", name=pv_name))
        pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": claim,
                            "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                        "volumeName": pv_name,
                        "resources": {"requests": {"storage": "1Gi"}}}}
        created = await self.kube.create(
            resource_path(CORE, "persistentvolumeclaims", self.namespace), pvc)
        self.made.append(resource_path(CORE, "persistentvolumeclaims", self.namespace, claim))
        # what the PV binder would have written: the claim's uid, then both phases Bound
        await self.kube.patch(resource_path(CORE, "persistentvolumes", name=pv_name),
                              {"spec": {"claimRef": {"uid": created["metadata"]["uid"]}}})
        await self.kube.patch(resource_path(CORE, "persistentvolumes", name=pv_name,
                                            sub="status"), {"status": {"phase": "Bound"}})
        await self.kube.patch(
            resource_path(CORE, "persistentvolumeclaims", self.namespace, claim, sub="status"),
            {"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                        "capacity": {"storage": "1Gi"}}})

    async def remove_all(self) -> None:
        # No pvc-protection / pv-protection controller runs here: drop their finalizers.
        for path in reversed(self.made):
            with contextlib.suppress(KubeError):
                await self.kube.patch(path, {"metadata": {"finalizers": None}})
            with contextlib.suppress(KubeError):
                await self.kube.delete(path)


@pytest.fixture
async def volumes(kube: KubeClient, namespace: str) -> AsyncIterator[Volumes]:
    made = Volumes(kube, namespace, f"{namespace}.csi.berthmaster.test")
    try:
        yield made
    finally:
        await made.remove_all()


def with_claims(name: str, scheduler: str, node: str, *claims: str) -> dict[str, Any]:
    return make_pod(name, scheduler, nodeSelector={"kubernetes.io/hostname": node},
                    volumes=[{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                             for i, c in enumerate(claims)])


async def bound(kube: KubeClient, namespace: str, name: str) -> str:
    return await wait_for(lambda: node_of(kube, namespace, name), timeout=30,
                          what=f"pod {name} bound")


async def failed_with(kube: KubeClient, namespace: str, name: str, text: str) -> str:
    async def message() -> str | None:
        for event in await events_for(kube, namespace, "FailedScheduling"):
            if event["involvedObject"]["name"] == name and text in event["message"]:
                return str(event["message"])
        return None
    return await wait_for(message, timeout=30, what=f"FailedScheduling for {name} with {text!r}")


async def test_csinode_count_limits_distinct_volumes_of_its_driver(
    kube: KubeClient, namespace: str, nodes: Any, volumes: Volumes, run_scheduler: Any
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    await volumes.csi_node(node, count=1)
    await volumes.bound_claim("data-a", handle="vol-a")
    await volumes.bound_claim("data-b", handle="vol-b")
    sched = await run_scheduler.start(policy=load_policy(POLICY, "csi limits policy"))

    await create_pod(kube, namespace, with_claims("first", sched.name, node, "data-a"))
    assert await bound(kube, namespace, "first") == node

    # a second volume of the driver would make two on a node that takes one
    await create_pod(kube, namespace, with_claims("second", sched.name, node, "data-b"))
    message = await failed_with(kube, namespace, "second", REASON)
    assert message.startswith("0/")
    assert f"1 {REASON}" in message
    assert await node_of(kube, namespace, "second") is None

    # the volume already on the node is counted once: another pod using it still fits
    await create_pod(kube, namespace, with_claims("sharer", sched.name, node, "data-a"))
    assert await bound(kube, namespace, "sharer") == node
    assert await node_of(kube, namespace, "second") is None

    # the watched CSINode lifts the limit: the parked pod is retried and fits
    await volumes.delete_csi_node(node)
    await volumes.csi_node(node, count=2)
    assert await bound(kube, namespace, "second") == node
