"""The autoscaler and gangs on the local control plane: a PodGroup grows the cluster in one
scale-up sized for it, and scale-down never strands a running gang below ``minMember``.

The all-or-nothing scale-up is modelled on cluster-autoscaler's
core/scaleup/orchestrator/orchestrator.go (``ScaleUp(..., allOrNothing)``, the
``atomic-scale-up.kubernetes.io`` ProvisioningRequest class); the PodGroup is scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1`` (deploy/crds/scheduling.x-k8s.io_podgroups.yaml) and the gang
is placed by berthmaster's scheduler with Coscheduling (examples/coscheduling/
scheduler-config.yaml, scheduler-plugins pkg/coscheduling/coscheduling.go). The operator runs
as a subprocess with the fixtures of test_autoscaler.py; the rules are docs/autoscaler.md's
"Gangs".
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.autoscaler.test_autoscaler import (
    AUTOSCALING,
    JSON,
    MACHINES,
    apply,
    cluster_autoscaler,
    crds,  # noqa: F401 (a fixture)
    events_for,
    machine_autoscaler,
    machine_set,
    operator,  # noqa: F401 (a fixture)
)
from tests.support.crds import install_crd
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
POD_GROUP_CRD = ROOT / "deploy/crds/scheduling.x-k8s.io_podgroups.yaml"
EXAMPLE = ROOT / "examples/coscheduling/scheduler-config.yaml"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER = "bm-gangs"
CA_PATH = resource_path(AUTOSCALING, "clusterautoscalers", name="default")


@pytest.fixture(scope="module")
def pod_group_crd(cluster: Any) -> None:
    install_crd(cluster, POD_GROUP_CRD)


@pytest.fixture(scope="module")
def gang_scheduler(cluster: Any, pod_group_crd: None, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[None]:
    """``berthmaster scheduler`` with the documented Coscheduling profile, as ``bm-gangs``."""
    folder = tmp_path_factory.mktemp("gang-scheduler")
    config = folder / "config.yaml"
    config.write_text(EXAMPLE.read_text().replace("schedulerName: berthmaster",
                                                  f"schedulerName: {SCHEDULER}"))
    log = folder / "scheduler.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*BERTHMASTER_CLI, "scheduler", "--config", str(config),
             "--kubeconfig", str(cluster.kubeconfig), "--leader-elect=false",
             "--metrics-bind-address", ""], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)
        print(log.read_text()[-4000:])  # shown when a test fails


def pod_group(name: str, namespace: str, min_member: int) -> JSON:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 10}}


def gang_pod(name: str, namespace: str, group: str, cpu: str, pool: str,
             node: str | None = None) -> JSON:
    """A member of ``group``; ``node`` binds it there (no scheduler), else bm-gangs places it.
    Safe to evict, so only the gang rule can keep its node."""
    spec: JSON = {"schedulerName": SCHEDULER, "nodeSelector": {"pool": pool},
                  "containers": [{"name": "c", "image": "busybox", "resources": {
                      "requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": namespace, "labels": {GROUP_LABEL: group},
        "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
        "spec": spec}


async def _registered(kube: KubeClient, namespace: str, count: int) -> list[str] | None:
    items, _ = await kube.list_all(resource_path(MACHINES, "machines", namespace))
    names = sorted(((m.get("status") or {}).get("nodeRef") or {}).get("name", "") for m in items)
    return names if len(names) == count and all(names) else None


async def _replicas(kube: KubeClient, namespace: str, name: str) -> int:
    machine_set_obj = await kube.get(resource_path(MACHINES, "machinesets", namespace, name))
    return int(machine_set_obj["spec"].get("replicas") or 0)


async def _gang_of_three_on_one_free_node(cluster: Any, kube: KubeClient, namespace: str,
                                          pool: str, max_size: int) -> list[str]:
    """MachineSet ``pool`` with one free 2-core node (max ``max_size``), scale-down off, and a
    PodGroup ``g`` (minMember 3) of three 1500m pods for it: each needs a whole node."""
    assert apply(cluster, machine_set(pool, namespace, replicas=1)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 1, max_size)).returncode == 0
    await wait_for(lambda: _registered(kube, namespace, 1), timeout=90, what="the free node")
    assert apply(cluster, cluster_autoscaler({"scaleDown": {"enabled": False}})).returncode == 0
    await kube.create(resource_path(group_path("scheduling.x-k8s.io", "v1alpha1"), "podgroups",
                                    namespace), pod_group("g", namespace, 3))
    names = [f"g-{i}" for i in range(3)]
    for name in names:
        await kube.create(resource_path(CORE, "pods", namespace),
                          gang_pod(name, namespace, "g", "1500m", pool))
    return names


async def test_a_gang_gets_one_scale_up_for_all_its_members(
        cluster: Any, operator: Any, gang_scheduler: None, kube: KubeClient,  # noqa: F811
        namespace: str) -> None:
    """Three members of a PodGroup (minMember 3) each need a whole 2-core node; one node is
    free. The autoscaler asks for the two missing nodes in one scale-up (1->3), never one node
    per retry, and the whole gang binds."""
    pool = f"gang-{namespace}"
    names = await _gang_of_three_on_one_free_node(cluster, kube, namespace, pool, max_size=3)
    try:

        async def all_bound() -> list[str] | None:
            nodes = [(await kube.get(resource_path(CORE, "pods", namespace, n)))["spec"].get(
                "nodeName") for n in names]
            return [str(n) for n in nodes] if all(nodes) else None

        nodes = await wait_for(all_bound, timeout=150, what="the whole gang bound")
        assert len(set(nodes)) == 3
        assert await _replicas(kube, namespace, pool) == 3
        triggered = [e["message"] for n in names
                     for e in await events_for(kube, namespace, n, "TriggeredScaleUp")]
        assert triggered, "the gang triggered the scale-up"
        expected = f"pod triggered scale-up: [{{MachineSet/{namespace}/{pool} 1->3 (max: 3)}}]"
        assert set(triggered) == {expected}
    finally:
        await kube.delete(CA_PATH)


async def test_scale_down_does_not_strand_a_running_gang(
        cluster: Any, operator: Any, pod_group_crd: None, kube: KubeClient,  # noqa: F811
        namespace: str) -> None:
    """Three nodes of one MachineSet: ``a`` and ``b`` each run one member of a PodGroup with
    minMember 2 (safe to evict, and each would fit on the other node), ``c`` is empty. ``c``
    goes; ``a`` and ``b`` stay, ``BlockedByPod`` for ``PodGroupMinMember`` in
    ``status.unremovableNodes``, and both members keep running."""
    pool = f"keep-{namespace}"
    assert apply(cluster, machine_set(pool, namespace, replicas=3)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, pool, 0, 3)).returncode == 0
    a, b, _ = await wait_for(lambda: _registered(kube, namespace, 3), timeout=90,
                             what="three Machines with their Nodes")
    await kube.create(resource_path(group_path("scheduling.x-k8s.io", "v1alpha1"),
                                    "podgroups", namespace), pod_group("g", namespace, 2))
    for name, node in (("g-0", a), ("g-1", b)):
        await kube.create(resource_path(CORE, "pods", namespace),
                          gang_pod(name, namespace, "g", "500m", pool, node=node))

    async def running() -> bool:
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
        return len(pods) == 2 and all(p.get("status", {}).get("phase") == "Running"
                                      for p in pods)

    await wait_for(running, timeout=60, what="both gang members running")
    assert apply(cluster, cluster_autoscaler({"scaleDown": {
        "enabled": True, "delayAfterAdd": "1s", "delayAfterDelete": "1s",
        "delayAfterFailure": "1s", "unneededTime": "3s"}})).returncode == 0
    try:
        async def kept() -> dict[str, JSON] | None:
            if await _replicas(kube, namespace, pool) != 2:
                return None
            status = (await kube.get(CA_PATH)).get("status") or {}
            found = {n["name"]: n for n in status.get("unremovableNodes") or []
                     if n["name"] in (a, b)}
            return found if len(found) == 2 else None

        found = await wait_for(kept, timeout=120, what="empty node gone, gang nodes kept")
        for node in (a, b):
            assert found[node]["reason"] == "BlockedByPod"
            assert found[node]["message"].startswith("PodGroupMinMember: pod ")
            assert "fewer than its minMember 2 running pods (2 running)" in \
                found[node]["message"]
        assert await running()
        assert await wait_for(lambda: _registered(kube, namespace, 2), timeout=90,
                              what="c's Machine deleted") == [a, b]
    finally:
        await kube.delete(CA_PATH)


async def test_a_gang_that_cannot_fit_at_max_size_scales_nothing(
        cluster: Any, operator: Any, gang_scheduler: None, kube: KubeClient,  # noqa: F811
        namespace: str) -> None:
    """The same gang with room for one new node only (max 2): the free node and one new node
    would hold two of the three members, so nothing is scaled up (all-or-nothing), and the
    PodGroup and its pods hear upstream's all-or-nothing reason in a NotTriggerScaleUp event."""
    pool = f"short-{namespace}"
    names = await _gang_of_three_on_one_free_node(cluster, kube, namespace, pool, max_size=2)
    reason = "not all pods would fit and scale-up is using all-or-nothing strategy"
    try:

        async def told() -> list[JSON] | None:
            found = [e for e in await events_for(kube, namespace, "g", "NotTriggerScaleUp")
                     if e["involvedObject"].get("kind") == "PodGroup" and reason in e["message"]]
            return found or None

        events = await wait_for(told, timeout=90, what="NotTriggerScaleUp on the PodGroup")
        # other namespaces' MachineSets may add their own reasons ("1 node(s) didn't match...")
        assert events[0]["message"].startswith("pod didn't trigger scale-up: ")
        assert events[0]["source"]["component"] == "cluster-autoscaler"
        # the decision that sent the event scaled nothing, nor did any before it
        assert await _replicas(kube, namespace, pool) == 1
        for name in names:
            assert await events_for(kube, namespace, name, "TriggeredScaleUp") == []
    finally:
        await kube.delete(CA_PATH)
