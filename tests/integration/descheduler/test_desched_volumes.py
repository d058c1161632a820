"""``berthmaster deschedule`` keeps the pods their local volumes pin to their node.

nodeFit runs the scheduler's default profile, VolumeBinding included, over the volume objects a
pass LISTs (scheduler/descheduler/fit.py): a pod whose claim is bound to a PersistentVolume with
node affinity to its node fits no other node. Upstream's descheduler nodeFit
(pkg/descheduler/node/node.go NodeFit, PodFitsAnyOtherNode) checks no volumes; this is a
berthmaster addition (docs/descheduler.md), the volume rule being kube-scheduler's
(pkg/scheduler/framework/plugins/volumebinding/binder.go FindPodVolumes, a bound volume's node
affinity).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from tests.integration.chart.chartkit import render
from tests.integration.descheduler.kit import (
    make_owner,
    make_pod,
    remaining,
    run_pass,
    v1alpha2,
    wait_running,
)
from tests.support.accounts import service_account_kubeconfig
from tests.support.builders import claim_volume
from tests.support.volumes import PinnedVolumes

RBAC = group_path("rbac.authorization.k8s.io", "v1")


@pytest.fixture
async def job_kubeconfig(kube: KubeClient, namespace: str, cluster: Any,
                         tmp_path: Path) -> AsyncIterator[Path]:
    """A kubeconfig of a ServiceAccount holding exactly what a descheduler Job runs with: the
    chart's descheduler ServiceAccount, ClusterRole and binding
    (charts/berthmaster/templates/descheduler-rbac.yaml), rendered for a release in this test's
    namespace."""
    release = f"vol-{namespace}"[:40]
    made = [obj for obj in render(release=release, namespace=namespace)
            if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
            and obj["metadata"]["name"].endswith("-descheduler")]
    account = next(obj for obj in made if obj["kind"] == "ServiceAccount")
    cluster_wide = [obj for obj in made if obj["kind"] != "ServiceAccount"]
    assert len(cluster_wide) == 2, [obj["metadata"]["name"] for obj in made]
    await kube.create(resource_path(CORE, "serviceaccounts", namespace), account)
    for obj in cluster_wide:
        kind = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
        await kube.create(resource_path(RBAC, kind), obj)
    try:
        yield await service_account_kubeconfig(kube, cluster, namespace,
                                               account["metadata"]["name"], tmp_path)
    finally:
        for obj in cluster_wide:
            kind = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
            with contextlib.suppress(KubeError):
                await kube.delete(resource_path(RBAC, kind, name=obj["metadata"]["name"]))


async def test_node_fit_keeps_the_duplicate_its_local_volume_pins(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any, volumes: PinnedVolumes
) -> None:
    """RemoveDuplicates (pkg/framework/plugins/removeduplicates/removeduplicates.go) with the
    DefaultEvictor's ``nodeFit: true``: two owners with two identical pods each on one node,
    one owner's pods mounting a claim bound to a local PV pinned to that node. The pinned pods
    fit no other node and stay; one of the otherwise identical unpinned pods is evicted."""
    crowded = (await nodes.create())["metadata"]["name"]
    await nodes.create()
    await volumes.claim_on("data", crowded)
    names = []
    for owner_name in ("pinned", "free"):
        owner = await make_owner(kube, namespace, owner_name)
        extra = {"volumes": [claim_volume("data")]} if owner_name == "pinned" else {}
        for i in range(2):
            name = f"{owner_name}-{i}"
            await make_pod(kube, namespace, name, crowded, owner, cpu="100m",
                           labels={"app": owner_name}, **extra)
            names.append(name)
    await wait_running(kube, namespace, names)

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemoveDuplicates", {"namespaces": {"include": [namespace]}}, point="balance",
        evictor={"nodeFit": True}))

    assert result.code == 0, result.output
    left = await remaining(kube, namespace)
    assert {"pinned-0", "pinned-1"} <= left, result.output
    assert len(left & {"free-0", "free-1"}) == 1, result.output
    assert "evicted 1 pod(s)" in result.output


async def test_node_fit_keeps_the_untolerating_pod_its_local_volume_pins(
    kube: KubeClient, namespace: str, nodes: Any, job_kubeconfig: Path, volumes: PinnedVolumes
) -> None:
    """RemovePodsViolatingNodeTaints (pkg/framework/plugins/removepodsviolatingnodetaints)
    with ``nodeFit: true``: neither pod tolerates its node's taint; the DefaultEvictor's
    PodFitsAnyOtherNode lets the unpinned one go to the other node and keeps the one whose
    local volume admits the tainted node only. The pass runs with exactly a descheduler Job's
    RBAC, which must let it LIST the volume objects."""
    tainted = (await nodes.create(taints=[{"key": "dedicated", "value": "gpu",
                                           "effect": "NoSchedule"}]))["metadata"]["name"]
    await nodes.create()
    await volumes.claim_on("data", tainted)
    owner = await make_owner(kube, namespace, "owner")
    await make_pod(kube, namespace, "pinned", tainted, owner, volumes=[claim_volume("data")])
    await make_pod(kube, namespace, "free", tainted, owner)
    await wait_running(kube, namespace, ["pinned", "free"])

    result = await run_pass(str(job_kubeconfig), v1alpha2(
        "RemovePodsViolatingNodeTaints", {"namespaces": {"include": [namespace]}},
        evictor={"nodeFit": True}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"pinned"}, result.output


async def test_protected_storage_classes_keep_only_their_pods(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    """The DefaultEvictor's ``podProtections`` with ``PodsWithPVC`` extra-enabled and
    ``config.PodsWithPVC.protectedStorageClasses`` (defaultevictor.go applyPVCPodsProtection,
    podStorageClasses): on a node whose taint none of the pods tolerate, the pod whose claim is
    of the protected class stays, the one of another class is evicted, and the one whose claim
    does not exist stays (upstream keeps a pod whose claim it cannot read)."""
    tainted = (await nodes.create(taints=[{"key": "dedicated", "value": "db",
                                           "effect": "NoSchedule"}]))["metadata"]["name"]
    for claim, storage_class in (("precious", "protected-sc"), ("scratch", "plain-sc")):
        await kube.create(resource_path(CORE, "persistentvolumeclaims", namespace), {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
            "spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
    names = {"keeps": "precious", "goes": "scratch", "unknown": "missing"}
    for name, claim in names.items():
        await make_pod(kube, namespace, name, tainted, await make_owner(kube, namespace, name),
                       volumes=[claim_volume(claim)])
    await wait_running(kube, namespace, list(names))

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsViolatingNodeTaints", {"namespaces": {"include": [namespace]}},
        evictor={"podProtections": {
            "extraEnabled": ["PodsWithPVC"],
            "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "protected-sc"}]}}}}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"keeps", "unknown"}, result.output
    assert "evicted 1 pod(s)" in result.output
