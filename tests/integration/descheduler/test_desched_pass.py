"""`berthmaster deschedule` against the local control plane, pods made Running by kwok."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.scheduler.descheduler.metrics import parse_termination_message
from tests.integration.descheduler.kit import (
    busy_node_scene,
    events_for,
    make_owner,
    make_pod,
    remaining,
    run_pass,
    tainted_node_scene,
    v1alpha2,
    wait_running,
)
from tests.support.waiting import wait_for
from tests.unit.descheduler.test_desched_policy import SEED_SAMPLE
from tests.unit.descheduler.test_desched_upstream_parity import CHART_DEFAULT


async def test_seed_sample_policy_runs_unchanged(kube: KubeClient, namespace: str, nodes: Any,
                                                 cluster: Any) -> None:
    # numberOfNodes: 3 in the sample: four idle nodes are needed
    hot, _names = await busy_node_scene(kube, namespace, nodes, idle=4)

    result = await run_pass(cluster.kubeconfig, SEED_SAMPLE)

    assert result.code == 0, result.output
    # 80% cpu and pods on the hot node, target 50%: three pods go, five stay.
    left = await remaining(kube, namespace)
    assert len(left) == 5, result.output
    assert "LowNodeUtilization" in result.output and "total: evicted 3 pod(s)" in result.output
    events = await wait_for(lambda: events_for(kube, namespace),
                            what=f"Descheduled events after:\n{result.output}")
    assert {e["reason"] for e in events} == {"LowNodeUtilization"}
    assert events[0]["note"] == (f"pod evicted from {hot['metadata']['name']} node by "
                                 "sigs.k8s.io/descheduler")


async def test_node_taints_evict_exactly_the_untolerating_pods(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any, tmp_path: Path
) -> None:
    node, owner = await tainted_node_scene(kube, namespace, nodes)
    await make_pod(kube, namespace, "bare", node, None)  # no owner: protected
    await make_pod(kube, namespace, "critical", node, owner, priorityClassName=(
        "system-cluster-critical"))
    await wait_running(kube, namespace, ["intruder", "welcome", "bare", "critical"])

    termination_log = tmp_path / "termination-log"
    termination_log.touch()  # the kubelet's file; the pass writes its counts there
    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsViolatingNodeTaints", {"namespaces": {"include": [namespace]}}),
        termination_log=str(termination_log))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"welcome", "bare", "critical"}, result.output
    assert "pod does not have any ownerRefs" in result.output
    assert "pod has system critical priority" in result.output
    # descheduler_pods_evicted_total's counts, handed to the operator
    assert parse_termination_message(termination_log.read_text()) == {
        ("success", "RemovePodsViolatingNodeTaints", "test", namespace, node): 1}


async def test_node_affinity_evicts_when_the_node_stops_matching(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    old = await nodes.create(labels={"disk": "hdd"})
    await nodes.create(labels={"disk": "ssd"})
    owner = await make_owner(kube, namespace, "owner")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}
    await make_pod(kube, namespace, "wants-ssd", old["metadata"]["name"], owner,
                   affinity=affinity)
    await make_pod(kube, namespace, "indifferent", old["metadata"]["name"], owner)
    await wait_running(kube, namespace, ["wants-ssd", "indifferent"])

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsViolatingNodeAffinity",
        {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"],
         "namespaces": {"include": [namespace]}}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"indifferent"}, result.output


async def test_duplicates_spread_one_owner_across_nodes(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    first = await nodes.create()
    await nodes.create()
    owner = await make_owner(kube, namespace, "web")
    names = ["web-0", "web-1", "web-2", "web-3"]
    for name in names:
        await make_pod(kube, namespace, name, first["metadata"]["name"], owner)
    await wait_running(kube, namespace, names)

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemoveDuplicates", {"namespaces": {"include": [namespace]}}, point="balance"))

    assert result.code == 0, result.output
    assert len(await remaining(kube, namespace)) == 2, result.output  # ceil(4 / 2) stay


async def test_a_pdb_stops_evictions_at_its_limit_and_dry_run_changes_nothing(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    node = (await nodes.create())["metadata"]["name"]
    owner = await make_owner(kube, namespace, "owner")
    names = ["a", "b", "c"]
    for name in names:
        await make_pod(kube, namespace, name, node, owner, labels={"app": "guarded"})
    await wait_running(kube, namespace, names)
    pdbs = resource_path(group_path("policy", "v1"), "poddisruptionbudgets", namespace)
    await kube.create(pdbs, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "guard"},
                             "spec": {"minAvailable": 2,
                                      "selector": {"matchLabels": {"app": "guarded"}}}})

    async def budget_known() -> bool:
        pdb = await kube.get(resource_path(group_path("policy", "v1"), "poddisruptionbudgets",
                                           namespace, "guard"))
        return (pdb.get("status") or {}).get("expectedPods") == 3

    await wait_for(budget_known, timeout=60, what="PDB status computed")

    async def older_than_a_second() -> bool:
        # maxPodLifeTimeSeconds 0 selects pods whose age in whole seconds is above 0, as
        # upstream's PodLifeTime compares: a pod created less than a second ago is not yet.
        pods, _ = await kube.list_all(resource_path(CORE, "pods", namespace))
        now = datetime.now(UTC)
        created = [parse_rfc3339(p["metadata"]["creationTimestamp"]) for p in pods]
        return all(c is not None and now - c >= timedelta(seconds=1.5) for c in created)

    await wait_for(older_than_a_second, timeout=30, what="the pods older than a second")
    policy = v1alpha2("PodLifeTime", {"maxPodLifeTimeSeconds": 0,
                                      "namespaces": {"include": [namespace]}})

    dry = await run_pass(cluster.kubeconfig, policy, dry_run=True)
    assert dry.code == 0, dry.output
    assert dry.output.count("[dry-run] PodLifeTime: would evict") == 3, dry.output
    assert await remaining(kube, namespace) == set(names)
    assert await events_for(kube, namespace) == []

    real = await run_pass(cluster.kubeconfig, policy)
    assert real.code == 0, real.output
    assert len(await remaining(kube, namespace)) == 2, real.output
    assert "2 x eviction refused (429 Too Many Requests)" in real.output, real.output


async def test_invalid_policy_exits_2_and_names_every_problem(cluster: Any) -> None:
    result = await run_pass(cluster.kubeconfig, {
        "apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
        "strategies": {"PodLifeTime": {"enabled": True},
                       "Nope": {"enabled": True}}})
    assert result.code == 2
    assert "MaxPodLifeTimeSeconds not set" in result.output
    assert 'strategies["Nope"]: unknown strategy name' in result.output


async def test_one_list_per_resource_type(kube: KubeClient, cluster: Any) -> None:
    """The pass issues exactly one LIST per kind: nodes, pods, namespaces, priorityclasses,
    PDBs, and the volume objects nodeFit's engine reads (PVs, PVCs, StorageClasses, CSINodes)."""
    from berthmaster.scheduler.descheduler import cycle

    calls: list[str] = []
    original = kube.list_all

    async def counting(path: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        return await original(path, *args, **kwargs)

    kube.list_all = counting  # type: ignore[method-assign]
    try:
        await cycle.list_cluster(kube)
    finally:
        kube.list_all = original  # type: ignore[method-assign]
    assert sorted(calls) == sorted([
        resource_path(CORE, "nodes"), resource_path(CORE, "pods"),
        resource_path(CORE, "namespaces"),
        resource_path(group_path("scheduling.k8s.io", "v1"), "priorityclasses"),
        resource_path(group_path("policy", "v1"), "poddisruptionbudgets"),
        resource_path(CORE, "persistentvolumes"), resource_path(CORE, "persistentvolumeclaims"),
        resource_path(group_path("storage.k8s.io", "v1"), "storageclasses"),
        resource_path(group_path("storage.k8s.io", "v1"), "csinodes"),
        resource_path(group_path("storage.k8s.io", "v1"), "csidrivers"),
        resource_path(group_path("storage.k8s.io", "v1"), "csistoragecapacities")])


async def test_anti_affinity_evicts_the_pod_others_rule_out(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    """Upstream's README example (RemovePodsViolatingInterPodAntiAffinity): podB and podC rule out
    podA on one node; podA goes."""
    node = (await nodes.create())["metadata"]["name"]
    await nodes.create()
    owner = await make_owner(kube, namespace, "owner")
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    await make_pod(kube, namespace, "pod-a", node, owner, labels={"app": "a"})
    await make_pod(kube, namespace, "pod-b", node, owner, labels={"app": "b"}, affinity=anti)
    await make_pod(kube, namespace, "pod-c", node, owner, labels={"app": "c"}, affinity=anti)
    await wait_running(kube, namespace, ["pod-a", "pod-b", "pod-c"])

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsViolatingInterPodAntiAffinity", {"namespaces": {"include": [namespace]}}))

    assert result.code == 0, result.output
    assert await remaining(kube, namespace) == {"pod-b", "pod-c"}, result.output


async def test_topology_spread_moves_pods_out_of_the_crowded_zone(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    crowded = (await nodes.create(zone="zone-a"))["metadata"]["name"]
    await nodes.create(zone="zone-b")
    owner = await make_owner(kube, namespace, "owner")
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
               "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        await make_pod(kube, namespace, name, crowded, owner, labels={"app": "web"},
                       topologySpreadConstraints=spread)
    await wait_running(kube, namespace, names)

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "RemovePodsViolatingTopologySpreadConstraint",
        {"namespaces": {"include": [namespace]}}, point="balance"))

    assert result.code == 0, result.output
    assert len(await remaining(kube, namespace)) == 2, result.output  # 4/0 -> 2/2


async def test_eviction_failure_event_notification_records_refused_evictions(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    """Upstream pkg/descheduler/evictions/evictions.go PodEvictor.EvictPod: with
    evictionFailureEventNotification, an eviction over maxNoOfPodsToEvictTotal leaves a
    Warning event (reason EvictionFailed, action Descheduled) on the pod."""
    node = (await nodes.create())["metadata"]["name"]
    owner = await make_owner(kube, namespace, "owner")
    names = ["first", "second"]
    for name in names:
        await make_pod(kube, namespace, name, node, owner)
    await wait_running(kube, namespace, names)
    # a pod's age counts in whole seconds, and PodLifeTime evicts only past the limit (0 s)
    await asyncio.sleep(1.1)

    result = await run_pass(cluster.kubeconfig, v1alpha2(
        "PodLifeTime", {"maxPodLifeTimeSeconds": 0, "namespaces": {"include": [namespace]}},
        maxNoOfPodsToEvictTotal=1, evictionFailureEventNotification=True))

    assert result.code == 0, result.output
    assert len(await remaining(kube, namespace)) == 1, result.output

    async def both_events() -> list[dict[str, Any]] | None:
        events = await events_for(kube, namespace)
        return events if len(events) == 2 else None

    events = await wait_for(both_events, what=f"two Descheduled events after:\n{result.output}")
    warning = [e for e in events if e["type"] == "Warning"]
    assert len(warning) == 1, events
    assert warning[0]["reason"] == "EvictionFailed"
    assert warning[0]["note"] == (f"pod eviction from {node} node by sigs.k8s.io/descheduler "
                                  "failed: total eviction limit exceeded (1)")
    assert warning[0]["regarding"]["name"] in names


async def test_the_upstream_charts_default_policy_runs(
    kube: KubeClient, namespace: str, nodes: Any, cluster: Any
) -> None:
    """kubernetes-sigs/descheduler charts/descheduler/values.yaml's default deschedulerPolicy
    (our copy in tests/unit/descheduler/samples/) runs a whole pass, every plugin included."""
    await nodes.create()
    result = await run_pass(cluster.kubeconfig, CHART_DEFAULT.read_text(), dry_run=True)

    assert result.code == 0, result.output
    for plugin in ("RemoveDuplicates", "RemovePodsHavingTooManyRestarts", "LowNodeUtilization",
                   "RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeTaints",
                   "RemovePodsViolatingInterPodAntiAffinity",
                   "RemovePodsViolatingTopologySpreadConstraint"):
        assert plugin in result.output, result.output
