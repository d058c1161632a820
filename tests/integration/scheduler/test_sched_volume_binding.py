"""VolumeBinding on the real API server, with kube-controller-manager's PV controller
(``persistentvolume-binder-controller``) doing its half, as on kind.

Upstream's sequence (``pkg/scheduler/framework/plugins/volumebinding/binder.go``): the
scheduler picks a node, writes a static volume's ``claimRef`` or a claim's
``volume.kubernetes.io/selected-node``, waits until the PV controller has bound the claim, and
only then binds the pod. There is no dynamic provisioner in the local control plane (kind's
rancher local-path-provisioner creates its directories through helper pods on real nodes, which
kwok nodes are not), so the provisioning test plays the provisioner's part itself, as an
external provisioner does: it waits for ``selected-node`` and creates a volume for the claim on
that node; the PV controller binds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.config import default_profile
from berthmaster.scheduler.plugins.dynamic_resources import REFUSED
from berthmaster.scheduler.plugins.volume_binding import (
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    REASON_BIND_CONFLICT,
    REASON_NODE_CONFLICT,
    REASON_NOT_ENOUGH_SPACE,
    REASON_UNBOUND_IMMEDIATE,
)
from tests.integration.scheduler.schedkit import create_pod, events_for, make_pod, node_of
from tests.support.waiting import wait_for

STORAGE = group_path("storage.k8s.io", "v1")
HOST = "kubernetes.io/hostname"
def policy() -> Any:
    """What users get: the default profile, VolumeBinding among its plugins."""
    return default_profile()


class Storage:
    """StorageClasses, PVs and claims of one test, removed after it."""

    def __init__(self, kube: KubeClient, namespace: str):
        self.kube = kube
        self.namespace = namespace
        self.made: list[str] = []

    async def storage_class(self, suffix: str, provisioner: str) -> str:
        name = f"{self.namespace}-{suffix}"
        await self.kube.create(resource_path(STORAGE, "storageclasses"), {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain"})
        self.made.append(resource_path(STORAGE, "storageclasses", name=name))
        return name

    async def csi_driver(self, name: str, storage_capacity: bool) -> None:
        """A CSIDriver (cluster-wide) that does or does not publish storage capacity."""
        await self.kube.create(resource_path(STORAGE, "csidrivers"), {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"storageCapacity": storage_capacity, "attachRequired": False}})
        self.made.append(resource_path(STORAGE, "csidrivers", name=name))

    async def capacity(self, name: str, cls: str, node: str, size: str) -> None:
        """A CSIStorageCapacity of ``cls`` with ``size`` free on ``node``'s topology."""
        await self.kube.create(resource_path(STORAGE, "csistoragecapacities", self.namespace), {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": name}, "storageClassName": cls, "capacity": size,
            "nodeTopology": {"matchLabels": {HOST: node}}})
        self.made.append(resource_path(STORAGE, "csistoragecapacities", self.namespace, name))

    async def local_pv(self, name: str, cls: str, node: str,
                       claim: dict[str, Any] | None = None,
                       affinity: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        full = f"{self.namespace}-{name}"
        expressions = affinity or [{"key": HOST, "operator": "In", "values": [node]}]
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": full},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": cls,
                     "local": {"path": f"/mnt/{full}"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                         {"matchExpressions": expressions}]}}}}
        if claim is not None:
            body["spec"]["claimRef"] = claim
            body["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": "test"}
        created = await self.kube.create(resource_path(CORE, "persistentvolumes"), body)
        self.made.append(resource_path(CORE, "persistentvolumes", name=full))
        return created

    async def claim(self, name: str, cls: str, size: str = "1Gi",
                    volume: str = "") -> dict[str, Any]:
        spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                                "resources": {"requests": {"storage": size}}}
        if volume:
            spec["volumeName"] = volume
        created = await self.kube.create(
            resource_path(CORE, "persistentvolumeclaims", self.namespace), {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                "spec": spec})
        self.made.append(resource_path(CORE, "persistentvolumeclaims", self.namespace, name))
        return created

    async def get_claim(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(
                resource_path(CORE, "persistentvolumeclaims", self.namespace, name))
        except KubeError as error:
            if error.not_found:
                return None
            raise

    async def remove_all(self) -> None:
        for path in reversed(self.made):
            with contextlib.suppress(KubeError):
                await self.kube.patch(path, {"metadata": {"finalizers": None}})
            with contextlib.suppress(KubeError):
                await self.kube.delete(path)


@pytest.fixture
async def storage(kube: KubeClient, namespace: str) -> AsyncIterator[Storage]:
    made = Storage(kube, namespace)
    try:
        yield made
    finally:
        await made.remove_all()


def with_claims(name: str, scheduler: str, *claims: str, **spec: Any) -> dict[str, Any]:
    return make_pod(name, scheduler, volumes=[
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
        for i, c in enumerate(claims)], **spec)


async def failed_with(kube: KubeClient, namespace: str, name: str, text: str,
                      timeout: float = 30) -> str:
    async def message() -> str | None:
        for event in await events_for(kube, namespace, "FailedScheduling"):
            if event["involvedObject"]["name"] == name and text in event["message"]:
                return str(event["message"])
        return None
    return await wait_for(message, timeout=timeout,
                          what=f"FailedScheduling for {name} with {text!r}")


async def two_nodes(nodes: Any) -> tuple[str, str]:
    a = (await nodes.create())["metadata"]["name"]
    b = (await nodes.create())["metadata"]["name"]
    return a, b


async def test_claim_to_provision_gets_selected_node_before_the_pod_is_bound(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    await two_nodes(nodes)
    cls = await storage.storage_class("dyn", f"{namespace}.provisioner.berthmaster.test")
    await storage.claim("data", cls)
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("web", sched.name, "data"))

    # the provisioner's side: wait for the scheduler's choice, then make a volume there
    async def selected() -> tuple[str, dict[str, Any]] | None:
        claim = await storage.get_claim("data")
        node = ((claim or {}).get("metadata", {}).get("annotations") or {}).get(
            ANN_SELECTED_NODE)
        return (node, claim) if node and claim else None

    node, claim = await wait_for(selected, timeout=30, what="selected-node on the claim")
    assert await node_of(kube, namespace, "web") is None  # PreBind waits: not bound yet
    written_at = time.monotonic()
    await asyncio.sleep(2)  # the wait holds: no volume yet, so no binding
    assert await node_of(kube, namespace, "web") is None
    pv = await storage.local_pv("data", cls, node, claim={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
        "name": "data", "uid": claim["metadata"]["uid"]})

    bound_node = await wait_for(lambda: node_of(kube, namespace, "web"), timeout=60,
                                what="pod web bound")
    print(f"provisioned volume to pod bound: {time.monotonic() - written_at - 2:.1f}s")
    assert bound_node == node
    final = await storage.get_claim("data")
    assert final is not None and final["spec"]["volumeName"] == pv["metadata"]["name"]
    assert final["status"]["phase"] == "Bound"


async def test_static_local_volume_draws_its_pod_and_is_taken_once(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    _, there = await two_nodes(nodes)
    cls = await storage.storage_class("local", NO_PROVISIONER)
    pv = await storage.local_pv("disk", cls, there)
    await storage.claim("first", cls)
    await storage.claim("second", cls)
    await asyncio.sleep(1)
    # WaitForFirstConsumer: the PV controller leaves the claims to the scheduler
    assert ((await storage.get_claim("first")) or {}).get("spec", {}).get("volumeName") is None
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("one", sched.name, "first"))
    await create_pod(kube, namespace, with_claims("two", sched.name, "second"))

    async def one_bound() -> str | None:
        got = [n for n in [await node_of(kube, namespace, p) for p in ("one", "two")] if n]
        return got[0] if got else None

    assert await wait_for(one_bound, timeout=60, what="a pod bound") == there
    winner = "one" if await node_of(kube, namespace, "one") else "two"
    loser = "two" if winner == "one" else "one"
    claim = "first" if winner == "one" else "second"
    other = "second" if winner == "one" else "first"

    volume = await kube.get(resource_path(CORE, "persistentvolumes",
                                          name=pv["metadata"]["name"]))
    assert volume["spec"]["claimRef"]["name"] == claim
    # written by the scheduler (GetBindVolumeToClaim), not by the PV controller
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    bound_claim = await storage.get_claim(claim)
    assert bound_claim is not None and bound_claim["status"]["phase"] == "Bound"
    assert bound_claim["spec"]["volumeName"] == pv["metadata"]["name"]

    message = await failed_with(kube, namespace, loser, REASON_BIND_CONFLICT)
    assert message.startswith("0/")
    await asyncio.sleep(2)
    assert await node_of(kube, namespace, loser) is None
    unbound = await storage.get_claim(other)
    assert unbound is not None and not unbound["spec"].get("volumeName")


async def test_claim_deleted_while_its_pod_waits_in_prebind(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    await two_nodes(nodes)
    # a provisioner nobody runs: PreBind waits for a volume that never comes
    cls = await storage.storage_class("nobody", f"{namespace}.absent.berthmaster.test")
    await storage.claim("data", cls)
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("waiting", sched.name, "data"))

    async def annotated() -> bool:
        claim = await storage.get_claim("data")
        return ANN_SELECTED_NODE in ((claim or {}).get("metadata", {}).get("annotations") or {})

    await wait_for(annotated, timeout=30, what="selected-node on the claim")
    # kube-apiserver's StorageObjectInUseProtection admission gave the claim the
    # kubernetes.io/pvc-protection finalizer. kube-controller-manager's protection controller
    # may lift it first: an unbound pod does not hold a claim
    # (pkg/controller/volume/pvcprotection/pvc_protection_controller.go podUsesPVC), so the
    # claim may already be gone when the finalizer is cleared here.
    path = resource_path(CORE, "persistentvolumeclaims", namespace, "data")
    await kube.delete(path)
    try:
        await kube.patch(path, {"metadata": {"finalizers": None}})
    except KubeError as error:
        if not error.not_found:
            raise
    message = await failed_with(kube, namespace, "waiting", "running PreBind plugin")
    assert message == ('running PreBind plugin "VolumeBinding": binding volumes: failed to '
                       f'check provisioning pvc: could not find v1.PersistentVolumeClaim '
                       f'"{namespace}/data"')
    # retried: now the claim is missing before any node is looked at
    await failed_with(kube, namespace, "waiting", 'persistentvolumeclaim "data" not found')
    assert await node_of(kube, namespace, "waiting") is None
    pod = await kube.get(resource_path(CORE, "pods", namespace, "waiting"))
    assert not pod["spec"].get("nodeName")


async def test_prebind_gives_up_after_the_bind_timeout(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    await two_nodes(nodes)
    cls = await storage.storage_class("slow", f"{namespace}.absent.berthmaster.test")
    await storage.claim("data", cls)
    sched = await run_scheduler.start(policy=policy(), volume_bind_timeout_seconds=3.0)
    started = time.monotonic()
    await create_pod(kube, namespace, with_claims("slow", sched.name, "data"))
    message = await failed_with(kube, namespace, "slow", "context deadline exceeded")
    print(f"PreBind timeout reported after {time.monotonic() - started:.1f}s")
    assert message == ('running PreBind plugin "VolumeBinding": binding volumes: context '
                       'deadline exceeded')
    assert await node_of(kube, namespace, "slow") is None


async def test_pod_with_resource_claims_is_refused(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    await nodes.create()
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, make_pod(
        "gpu", sched.name, resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}]))
    message = await failed_with(kube, namespace, "gpu", REFUSED)
    assert message.startswith("0/") and message.endswith(f"{REFUSED}.")
    await asyncio.sleep(1)
    assert await node_of(kube, namespace, "gpu") is None
    pod = await kube.get(resource_path(CORE, "pods", namespace, "gpu"))
    condition = [c for c in pod["status"].get("conditions") or ()
                 if c["type"] == "PodScheduled"]
    assert condition and condition[0]["reason"] == "Unschedulable"
    assert REFUSED in condition[0]["message"]


async def selected_node(storage: Storage, claim: str) -> str | None:
    found = await storage.get_claim(claim)
    return ((found or {}).get("metadata", {}).get("annotations") or {}).get(ANN_SELECTED_NODE)


async def test_claim_to_provision_needs_enough_free_storage(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    """binder.go, checkVolumeProvisions / hasEnoughCapacity: the provisioner's CSIDriver
    publishes capacity (``storageCapacity: true``), so a claim is provisioned only where a
    CSIStorageCapacity of its class offers its size; a new capacity retries the pod
    (volume_binding.go, EventsToRegister: CSIStorageCapacity Add)."""
    small, roomy = await two_nodes(nodes)
    driver = f"{namespace}.capacity.berthmaster.test"
    await storage.csi_driver(driver, storage_capacity=True)
    cls = await storage.storage_class("capacity", driver)
    await storage.capacity("small", cls, small, "1Gi")
    await storage.capacity("roomy", cls, roomy, "10Gi")
    await storage.claim("fits", cls, size="5Gi")
    await storage.claim("huge", cls, size="20Gi")
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("fits", sched.name, "fits"))
    await create_pod(kube, namespace, with_claims("huge", sched.name, "huge"))

    # only the node with room is chosen for the 5Gi claim (PreBind then waits for a volume)
    assert await wait_for(lambda: selected_node(storage, "fits"), timeout=30,
                          what="selected-node on claim fits") == roomy
    message = await failed_with(kube, namespace, "huge", REASON_NOT_ENOUGH_SPACE)
    assert message == (f"0/2 nodes are available: 2 {REASON_NOT_ENOUGH_SPACE}. no new claims "
                       "to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not "
                       "helpful for scheduling.")
    assert await selected_node(storage, "huge") is None

    # the driver publishes a larger pool on the small node: the pod is retried and goes there
    await storage.capacity("grown", cls, small, "50Gi")
    assert await wait_for(lambda: selected_node(storage, "huge"), timeout=30,
                          what="selected-node on claim huge") == small
    for pod in ("fits", "huge"):
        assert await node_of(kube, namespace, pod) is None  # no provisioner: never bound


async def test_a_driver_that_does_not_publish_capacity_is_not_checked(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    """hasEnoughCapacity: a CSIDriver with ``storageCapacity: false`` opts out, so the
    CSIStorageCapacity objects of its class are ignored."""
    small, _ = await two_nodes(nodes)
    driver = f"{namespace}.nocapacity.berthmaster.test"
    await storage.csi_driver(driver, storage_capacity=False)
    cls = await storage.storage_class("nocapacity", driver)
    await storage.capacity("small", cls, small, "1Gi")
    await storage.claim("data", cls, size="5Gi")
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("web", sched.name, "data"))
    assert await wait_for(lambda: selected_node(storage, "data"), timeout=30,
                          what="selected-node on the claim") is not None


async def test_claim_naming_a_missing_storage_class(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    """A class that does not exist is not delayed binding (component-helpers
    storage/volume/pv_helpers.go, IsDelayBindingMode: not found is ``false, nil``), so the
    claim is an unbound immediate claim (binder.go, GetPodVolumeClaims) and the pod is refused
    on every node with upstream's text; the PV controller says why on the claim. Once the class
    exists (WaitForFirstConsumer, a local volume), the pod is retried and bound."""
    _, there = await two_nodes(nodes)
    cls = f"{namespace}-not-yet"
    await storage.claim("data", cls)
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("web", sched.name, "data"))
    message = await failed_with(kube, namespace, "web", REASON_UNBOUND_IMMEDIATE)
    # refused at PreFilter: DynamicResources' PostFilter has no state ("not found"), as
    # kube-scheduler 1.35 writes it (see scheduler/preemption.py)
    assert message == f"0/2 nodes are available: {REASON_UNBOUND_IMMEDIATE}. not found"

    async def provisioning_failed() -> str | None:
        for event in await events_for(kube, namespace, "ProvisioningFailed"):
            if event["involvedObject"]["name"] == "data":
                return str(event["message"])
        return None

    said = await wait_for(provisioning_failed, timeout=60,
                          what="the PV controller's ProvisioningFailed on the claim")
    assert said == f'storageclass.storage.k8s.io "{cls}" not found'
    assert await node_of(kube, namespace, "web") is None

    await storage.local_pv("disk", await storage.storage_class("not-yet", NO_PROVISIONER), there)
    assert await wait_for(lambda: node_of(kube, namespace, "web"), timeout=60,
                          what="pod web bound once its class exists") == there


async def test_volume_with_malformed_node_affinity(
    kube: KubeClient, namespace: str, nodes: Any, storage: Storage, run_scheduler: Any
) -> None:
    """A volume's node affinity the API server refuses (an unknown operator) never exists; one
    it accepts but no node can satisfy (``Gt`` with a value that is not an integer: the API
    server checks only the count of values, core/validation ValidateNodeSelectorRequirement,
    while labels.NewRequirement refuses to parse it, so component-helpers'
    CheckNodeAffinity matches no node) keeps its pods pending with upstream's texts, bound
    (``node(s) didn't match PersistentVolume's node affinity``) or to bind (``node(s) didn't
    find available persistent volumes to bind``), and no pod bound to a node it cannot reach."""
    first, _ = await two_nodes(nodes)
    cls = await storage.storage_class("odd", NO_PROVISIONER)
    with pytest.raises(KubeError) as refused:
        await storage.local_pv("near", cls, first, affinity=[
            {"key": HOST, "operator": "Near", "values": [first]}])
    assert refused.value.status == 422
    assert ('spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: '
            'Invalid value: "Near": not a valid selector operator') in refused.value.message

    odd = [{"key": HOST, "operator": "Gt", "values": ["abc"]}]
    await storage.local_pv("free", cls, first, affinity=odd)
    await storage.claim("unbound", cls)
    # pre-bound both ways: the PV controller completes the binding without the scheduler
    claimed = await storage.claim("bound", cls, volume=f"{namespace}-taken")
    await storage.local_pv("taken", cls, first, affinity=odd, claim={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
        "name": "bound", "uid": claimed["metadata"]["uid"]})

    async def claim_bound() -> bool:
        found = await storage.get_claim("bound")
        return ((found or {}).get("status") or {}).get("phase") == "Bound"

    await wait_for(claim_bound, timeout=60, what="claim bound bound by the PV controller")
    sched = await run_scheduler.start(policy=policy())
    await create_pod(kube, namespace, with_claims("to-bind", sched.name, "unbound"))
    await create_pod(kube, namespace, with_claims("bound", sched.name, "bound"))
    message = await failed_with(kube, namespace, "to-bind", REASON_BIND_CONFLICT)
    assert message.startswith(f"0/2 nodes are available: 2 {REASON_BIND_CONFLICT}.")
    message = await failed_with(kube, namespace, "bound", REASON_NODE_CONFLICT)
    assert message.startswith(f"0/2 nodes are available: 2 {REASON_NODE_CONFLICT}.")
    for pod in ("to-bind", "bound"):
        assert await node_of(kube, namespace, pod) is None
    free = await kube.get(resource_path(CORE, "persistentvolumes",
                                        name=f"{namespace}-free"))
    assert not free["spec"].get("claimRef")
