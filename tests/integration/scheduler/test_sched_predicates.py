"""Pods with our schedulerName land where each predicate family allows, and only there."""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.scheduler.policy import load_policy
from tests.integration.scheduler.schedkit import create_pod, events_for, get_pod, make_pod, node_of
from tests.support.waiting import wait_for


async def bound(kube: KubeClient, namespace: str, name: str, timeout: float = 30) -> str:
    return await wait_for(lambda: node_of(kube, namespace, name), timeout=timeout,
                          what=f"pod {name} bound")


async def failed_with(kube: KubeClient, namespace: str, name: str, text: str) -> str:
    """The first FailedScheduling message for pod ``name`` ("" = any) containing ``text``."""
    async def message() -> str | None:
        for event in await events_for(kube, namespace, "FailedScheduling"):
            if name in ("", event["involvedObject"]["name"]) and text in event["message"]:
                return str(event["message"])
        return None
    return await wait_for(message, timeout=30, what=f"FailedScheduling for {name} with {text!r}")


async def test_taints_and_tolerations(kube: KubeClient, namespace: str, nodes: Any,
                                      run_scheduler: Any) -> None:
    tainted = await nodes.create(labels={"pool": "gpu"},
                                 taints=[{"key": "dedicated", "value": "gpu",
                                          "effect": "NoSchedule"}])
    plain = await nodes.create(labels={"pool": "general"})
    sched = await run_scheduler.start()
    for i in range(3):
        await create_pod(kube, namespace, make_pod(f"plain-{i}", sched.name))
    await create_pod(kube, namespace, make_pod(
        "tolerant", sched.name, nodeSelector={"pool": "gpu"},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                      "effect": "NoSchedule"}]))
    for i in range(3):
        assert await bound(kube, namespace, f"plain-{i}") == plain["metadata"]["name"]
    assert await bound(kube, namespace, "tolerant") == tainted["metadata"]["name"]


async def test_node_selector_and_required_node_affinity(kube: KubeClient, namespace: str,
                                                        nodes: Any, run_scheduler: Any) -> None:
    ssd = await nodes.create(labels={"disk": "ssd"}, zone="zone-a")
    await nodes.create(labels={"disk": "hdd"}, zone="zone-b")
    sched = await run_scheduler.start()
    await create_pod(kube, namespace, make_pod("wants-ssd", sched.name,
                                               nodeSelector={"disk": "ssd"}))
    await create_pod(kube, namespace, make_pod("wants-zone-a", sched.name, affinity={
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In",
                 "values": ["zone-a"]}]}]}}}))
    await create_pod(kube, namespace, make_pod("wants-nvme", sched.name,
                                               nodeSelector={"disk": "nvme"}))
    assert await bound(kube, namespace, "wants-ssd") == ssd["metadata"]["name"]
    assert await bound(kube, namespace, "wants-zone-a") == ssd["metadata"]["name"]
    message = await failed_with(kube, namespace, "wants-nvme", "0/")
    assert "didn't match Pod's node affinity/selector" in message
    assert await node_of(kube, namespace, "wants-nvme") is None


async def test_required_pod_anti_affinity_spreads_one_per_node(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    created = [await nodes.create() for _ in range(3)]
    sched = await run_scheduler.start()
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    for i in range(4):
        await create_pod(kube, namespace, make_pod(f"db-{i}", sched.name, labels={"app": "db"},
                                                   affinity=anti))

    async def three_bound() -> list[str] | None:
        placed = [await node_of(kube, namespace, f"db-{i}") for i in range(4)]
        found = [n for n in placed if n]
        return found if len(found) == 3 else None

    placed = await wait_for(three_bound, timeout=30, what="three of four db pods bound")
    assert sorted(placed) == sorted(n["metadata"]["name"] for n in created)
    message = await failed_with(kube, namespace, "", "didn't match pod anti-affinity rules")
    assert message.startswith("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity")


async def test_resources_never_overcommit(kube: KubeClient, namespace: str, nodes: Any,
                                          run_scheduler: Any) -> None:
    small = [await nodes.create(capacity={"cpu": "2", "memory": "4Gi", "pods": "110"})
             for _ in range(2)]
    sched = await run_scheduler.start()
    for i in range(5):
        await create_pod(kube, namespace, make_pod(f"one-cpu-{i}", sched.name, cpu="1"))

    async def four_bound() -> list[str] | None:
        placed = [await node_of(kube, namespace, f"one-cpu-{i}") for i in range(5)]
        found = [n for n in placed if n]
        return found if len(found) == 4 else None

    placed = await wait_for(four_bound, timeout=30, what="four one-cpu pods bound")
    for node in small:
        assert placed.count(node["metadata"]["name"]) == 2
    message = await failed_with(kube, namespace, "", "Insufficient cpu")
    assert message.startswith("0/2 nodes are available: 2 Insufficient cpu.")


async def test_host_ports(kube: KubeClient, namespace: str, nodes: Any,
                          run_scheduler: Any) -> None:
    created = [await nodes.create() for _ in range(2)]
    sched = await run_scheduler.start()
    for i in range(3):
        body = make_pod(f"web-{i}", sched.name)
        body["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        await create_pod(kube, namespace, body)

    async def two_bound() -> list[str] | None:
        placed = [await node_of(kube, namespace, f"web-{i}") for i in range(3)]
        found = [n for n in placed if n]
        return found if len(found) == 2 else None

    placed = await wait_for(two_bound, timeout=30, what="two web pods bound")
    assert sorted(placed) == sorted(n["metadata"]["name"] for n in created)
    await failed_with(kube, namespace, "", "didn't have free ports for the requested pod ports")


async def test_pods_for_other_schedulers_are_untouched(kube: KubeClient, namespace: str,
                                                       nodes: Any, run_scheduler: Any) -> None:
    await nodes.create()
    sched = await run_scheduler.start()
    await create_pod(kube, namespace, make_pod("theirs", "someone-else"))
    await create_pod(kube, namespace, make_pod("ours", sched.name))
    await bound(kube, namespace, "ours")
    theirs = await get_pod(kube, namespace, "theirs")
    assert not theirs["spec"].get("nodeName")
    assert not (theirs.get("status") or {}).get("conditions")
    involved = {e["involvedObject"]["name"] for e in await events_for(kube, namespace)}
    assert "theirs" not in involved


POLICY = """
kind: Policy
apiVersion: v1
predicates:
- name: PodFitsResources
- name: rackRequired
  argument:
    labelsPresence:
      labels: [rack]
      presence: true
priorities:
- name: LeastRequestedPriority
  weight: 1
"""


async def test_policy_file_predicates_are_honoured(kube: KubeClient, namespace: str,
                                                   nodes: Any, run_scheduler: Any) -> None:
    racked = await nodes.create(labels={"rack": "r1"})
    await nodes.create()
    sched = await run_scheduler.start(policy=load_policy(POLICY, "test policy"))
    for i in range(4):
        await create_pod(kube, namespace, make_pod(f"r-{i}", sched.name))
    for i in range(4):
        assert await bound(kube, namespace, f"r-{i}") == racked["metadata"]["name"]
