"""The autoscaler's writes on the real API server: what it read may be stale, what it writes
must not undo anyone else's change.

``run_once`` runs in-process, its cluster read given by the test (``read``): the autoscaler
decides on its watch caches, which lag the API server by the watch's delivery delay, and the
test makes the API server move on between that read and the writes.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.loop import (
    MACHINE_API,
    AutoscalerState,
    ClusterState,
    default_placement,
    run_once,
)
from berthmaster.operator.autoscaler.taints import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from tests.integration.autoscaler.test_autoscaler import (
    MAX_KEY,
    MIN_KEY,
    crds,  # noqa: F401 - the CRDs fixture
    machine_set,
)
from tests.support.waiting import wait_for

JSON = dict[str, Any]
AUTOSCALER: JSON = {"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
                    "metadata": {"name": "default"}, "spec": {}}


def reader(state: ClusterState) -> Any:
    async def read(config: AutoscalerConfig) -> ClusterState:
        return state
    return read


async def autoscaled_machine_set(kube: KubeClient, namespace: str, name: str, replicas: int,
                                 low: int = 0, high: int = 5) -> JSON:
    body = machine_set(name, namespace, replicas)
    body["metadata"]["annotations"] = {MIN_KEY: str(low), MAX_KEY: str(high)}
    return await kube.create(resource_path(MACHINE_API, "machinesets", namespace), body)


async def replicas_of(kube: KubeClient, namespace: str, name: str) -> int:
    found = await kube.get(resource_path(MACHINE_API, "machinesets", namespace, name))
    return int(found["spec"]["replicas"])


async def events_about(kube: KubeClient, namespace: str, name: str) -> list[JSON]:
    listed = await kube.get(resource_path(CORE, "events", namespace),
                            fieldSelector=f"involvedObject.name={name}")
    return list(listed.get("items") or [])


async def test_a_replicas_change_made_after_the_read_is_not_overwritten(
        kube: KubeClient, namespace: str, crds: None) -> None:  # noqa: F811
    """cluster-autoscaler's clusterapi provider sets a size through the scale subresource with
    the resourceVersion it read (clusterapi_unstructured.go, ``SetSize``: Get the Scale, then
    Update it); the size a decision was made on is checked again before writing, so a user's
    resize between the autoscaler's read and its write stands (the next loop decides on it).
    """
    read_ms = await autoscaled_machine_set(kube, namespace, "grow", replicas=1)
    pod = await kube.create(resource_path(CORE, "pods", namespace), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting"},
        "spec": {"schedulerName": "nobody", "nodeSelector": {"pool": "grow"},
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "100m"}}}]}})
    seen = copy.deepcopy(pod)
    seen["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    # someone resizes the MachineSet after the autoscaler's read
    await kube.patch(resource_path(MACHINE_API, "machinesets", namespace, "grow"),
                     {"spec": {"replicas": 4}})

    state = AutoscalerState(initialized=True)
    await run_once(kube, AUTOSCALER, state, default_placement(), now=time.time() + 3600,
                   read=reader(ClusterState([], [seen], [], {}, [read_ms], [], None)))

    assert await replicas_of(kube, namespace, "grow") == 4
    assert "grow" not in str(state.provisioning) and state.last_scale_up is None


async def test_taints_a_previous_run_left_are_cleaned_at_start(
        kube: KubeClient, namespace: str, nodes: Any) -> None:
    """cluster-autoscaler's first RunOnce (core/static_autoscaler.go, ``cleanUpIfRequired``)
    removes every ToBeDeleted and DeletionCandidate taint (utils/taints/taints.go,
    ``CleanAllToBeDeleted``, ``CleanAllDeletionCandidates``) with a ClusterAutoscalerCleanup
    event: a process that died between tainting a node and removing it leaves no node
    unschedulable for ever. Other taints stay."""
    left = await nodes.create(taints=[
        {"key": TO_BE_DELETED_TAINT, "value": "1700000000", "effect": "NoSchedule"},
        {"key": DELETION_CANDIDATE_TAINT, "value": "1700000000", "effect": "PreferNoSchedule"},
        {"key": "example.com/dedicated", "value": "x", "effect": "NoSchedule"}])
    name = left["metadata"]["name"]

    await run_once(kube, AUTOSCALER, AutoscalerState(), default_placement(),
                   read=reader(ClusterState([left], [], [], {}, [], [], None)))

    node = await kube.get(resource_path(CORE, "nodes", name=name))
    keys = [t["key"] for t in node["spec"].get("taints") or []]
    assert TO_BE_DELETED_TAINT not in keys and DELETION_CANDIDATE_TAINT not in keys
    assert "example.com/dedicated" in keys
    messages = [e["message"] for e in await events_about(kube, "default", name)
                if e["reason"] == "ClusterAutoscalerCleanup"]
    assert f"removed {TO_BE_DELETED_TAINT} taints from node {name}" in messages
    assert f"removed {DELETION_CANDIDATE_TAINT} taints from node {name}" in messages


async def test_a_blocking_pod_that_arrives_after_the_decision_keeps_the_node(
        kube: KubeClient, namespace: str, nodes: Any, crds: None) -> None:  # noqa: F811
    """Drainability is judged again after the ToBeDeleted taint, on a fresh list of the node's
    pods, as upstream's actuator does (core/scaledown/actuation/actuator.go,
    ``deleteNodesAsync``: a snapshot made after ``taintNodesSync``, ``GetPodsToMove``, and
    ``AbortNodeDeletion`` when it fails): a pod with no controller bound meanwhile keeps the
    node, its taint is removed, its Machine is not marked and the MachineSet keeps its size."""
    node = await nodes.create()
    name = node["metadata"]["name"]
    read_ms = await autoscaled_machine_set(kube, namespace, "shrink", replicas=1)
    machine = await kube.create(resource_path(MACHINE_API, "machines", namespace), {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "shrink-a", "labels": {
            "machine.openshift.io/cluster-api-machineset": "shrink"}},
        "spec": {"providerSpec": {}}})
    seen_machine = copy.deepcopy(machine)
    seen_machine["status"] = {"nodeRef": {"kind": "Node", "name": name}}
    # after the read: a bare pod (no controller: upstream's NotReplicated) lands on the node
    await kube.create(resource_path(CORE, "pods", namespace), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
        "spec": {"nodeName": name, "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})

    state = AutoscalerState(initialized=True)
    state.unneeded_since[name] = time.monotonic() - 24 * 3600  # unneeded for a day
    await run_once(kube, AUTOSCALER, state, default_placement(),
                   read=reader(ClusterState([node], [], [], {}, [read_ms], [seen_machine], None)))

    assert await replicas_of(kube, namespace, "shrink") == 1
    after = await kube.get(resource_path(MACHINE_API, "machines", namespace, "shrink-a"))
    assert "machine.openshift.io/delete-machine" not in (
        after["metadata"].get("annotations") or {})
    now_node = await kube.get(resource_path(CORE, "nodes", name=name))
    assert TO_BE_DELETED_TAINT not in [t["key"] for t in now_node["spec"].get("taints") or []]
    failed = [e["message"] for e in await events_about(kube, "default", name)
              if e["reason"] == "ScaleDownFailed"]
    assert any("NotReplicated" in message for message in failed), failed
    assert (await kube.get(resource_path(CORE, "pods", namespace, "bare")))["metadata"].get(
        "deletionTimestamp") is None


async def _node_with_daemonset_pod(kube: KubeClient, namespace: str, nodes: Any,
                                   tag: str) -> tuple[JSON, JSON]:
    """A fresh node and the pod a real DaemonSet (kube-controller-manager's) runs on it."""
    node = await nodes.create(labels={"ds-test": tag})
    await kube.create(resource_path(group_path("apps", "v1"), "daemonsets", namespace), {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                     "nodeSelector": {"ds-test": tag},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}})

    async def ds_pod() -> JSON | None:
        listed = await kube.get(resource_path(CORE, "pods", namespace),
                                labelSelector="app=agent")
        found = listed.get("items") or []
        return found[0] if found else None

    pod = await wait_for(ds_pod, timeout=60, what="the DaemonSet's pod")
    if not pod["spec"].get("nodeName"):  # no kube-scheduler here: bind it as one would
        await kube.create(resource_path(CORE, "pods", namespace, pod["metadata"]["name"],
                                        "binding"), {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod["metadata"]["name"]},
            "target": {"kind": "Node", "name": node["metadata"]["name"]}})
        pod = await kube.get(resource_path(CORE, "pods", namespace, pod["metadata"]["name"]))
    assert pod["spec"]["nodeName"] == node["metadata"]["name"]
    return node, pod


async def _gone_or_terminating(kube: KubeClient, pod: JSON) -> bool:
    meta = pod["metadata"]
    try:
        now = await kube.get(resource_path(CORE, "pods", meta["namespace"], meta["name"]))
    except KubeError as error:
        return error.not_found
    return now["metadata"]["uid"] != meta["uid"] or bool(now["metadata"].get("deletionTimestamp"))


async def test_daemonset_pods_are_evicted_from_an_occupied_node(
        kube: KubeClient, namespace: str, nodes: Any, crds: None) -> None:  # noqa: F811
    """cluster-autoscaler core/scaledown/actuation/drain.go ``DrainNode``/``EvictDaemonSetPods``
    with config/flags/flags.go's defaults --daemonset-eviction-for-occupied-nodes=true and
    --daemonset-eviction-for-empty-nodes=false: removing a node whose pods must move evicts its
    DaemonSet pods too; removing an empty node leaves them to go with the node."""
    tag = namespace
    node, ds_pod = await _node_with_daemonset_pod(kube, namespace, nodes, tag)
    name = node["metadata"]["name"]
    room = await nodes.create()  # where the moved pod fits; not autoscaled
    moved = await kube.create(resource_path(CORE, "pods", namespace), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "moved", "annotations": {
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
        "spec": {"nodeName": name, "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    read_ms = await autoscaled_machine_set(kube, namespace, "shrink", replicas=1)
    machine = await kube.create(resource_path(MACHINE_API, "machines", namespace), {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "shrink-a", "labels": {
            "machine.openshift.io/cluster-api-machineset": "shrink"}},
        "spec": {"providerSpec": {}}})
    machine["status"] = {"nodeRef": {"kind": "Node", "name": name}}

    state = AutoscalerState(initialized=True)
    state.unneeded_since[name] = time.monotonic() - 24 * 3600
    await run_once(kube, AUTOSCALER, state, default_placement(), read=reader(ClusterState(
        [node, room], [ds_pod, moved], [], {}, [read_ms], [machine], None)))

    assert await replicas_of(kube, namespace, "shrink") == 0
    assert await _gone_or_terminating(kube, moved)
    assert await _gone_or_terminating(kube, ds_pod)


async def test_an_empty_node_keeps_its_daemonset_pods_until_it_goes(
        kube: KubeClient, namespace: str, nodes: Any, crds: None) -> None:  # noqa: F811
    """The other half of ``test_daemonset_pods_are_evicted_from_an_occupied_node``:
    --daemonset-eviction-for-empty-nodes defaults to false."""
    node, ds_pod = await _node_with_daemonset_pod(kube, namespace, nodes, namespace)
    name = node["metadata"]["name"]
    read_ms = await autoscaled_machine_set(kube, namespace, "shrink", replicas=1)
    machine = await kube.create(resource_path(MACHINE_API, "machines", namespace), {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "shrink-a", "labels": {
            "machine.openshift.io/cluster-api-machineset": "shrink"}},
        "spec": {"providerSpec": {}}})
    machine["status"] = {"nodeRef": {"kind": "Node", "name": name}}

    state = AutoscalerState(initialized=True)
    state.unneeded_since[name] = time.monotonic() - 24 * 3600
    await run_once(kube, AUTOSCALER, state, default_placement(), read=reader(ClusterState(
        [node], [ds_pod], [], {}, [read_ms], [machine], None)))

    assert await replicas_of(kube, namespace, "shrink") == 0
    assert not await _gone_or_terminating(kube, ds_pod)
