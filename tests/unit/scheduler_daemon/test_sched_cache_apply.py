"""How watch events reach the snapshot and the queue (ClusterCache.apply, no API server)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.daemon.cache import (
    ADDED,
    DELETED,
    MODIFIED,
    RESOURCES,
    ClusterCache,
    Informer,
)
from berthmaster.scheduler.daemon.hints import node_change
from berthmaster.scheduler.daemon.queue import SchedulingQueue
from berthmaster.scheduler.snapshot import Snapshot

JSON = dict[str, Any]


def make_pod(name: str, node: str = "", scheduler: str = "berthmaster", cpu: str = "1",
             **meta: Any) -> JSON:
    spec: JSON = {"schedulerName": scheduler, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": "1", **meta}, "spec": spec}


def make_node(name: str, cpu: str = "4", heartbeat: str = "t0", **labels: str) -> JSON:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
            "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": heartbeat}]}}


@pytest.fixture
def cache() -> ClusterCache:
    return ClusterCache(kube=None, snapshot=Snapshot(), queue=SchedulingQueue(),  # type: ignore[arg-type]
                        scheduler_name="berthmaster")


def test_pending_pod_of_ours_is_queued_others_are_not(cache: ClusterCache) -> None:
    cache.apply("Pod", ADDED, make_pod("mine"), None)
    cache.apply("Pod", ADDED, make_pod("theirs", scheduler="default-scheduler"), None)
    assert "ns/mine" in cache.queue
    assert "ns/theirs" not in cache.queue


def test_pods_bound_by_any_scheduler_count_on_their_node(cache: ClusterCache) -> None:
    cache.apply("Node", ADDED, make_node("n1"), None)
    cache.apply("Pod", ADDED, make_pod("other", node="n1", scheduler="default-scheduler"), None)
    assert [p.name for p in cache.snapshot.pods_on("n1")] == ["other"]


def test_bound_pod_leaves_the_queue(cache: ClusterCache) -> None:
    pending = make_pod("p")
    cache.apply("Pod", ADDED, pending, None)
    cache.apply("Pod", MODIFIED, make_pod("p", node="n1"), pending)
    assert "ns/p" not in cache.queue


def test_stale_unbound_update_keeps_the_assumed_placement(cache: ClusterCache) -> None:
    cache.apply("Node", ADDED, make_node("n1"), None)
    pod = make_pod("p")
    cache.apply("Pod", ADDED, pod, None)
    info = cache.queue.pop_nowait()
    assert info is not None
    cache.snapshot.assume(pod, "n1")
    cache.queue.done(info.key)  # bound; the watch has not shown it yet
    cache.apply("Pod", MODIFIED, make_pod("p", resourceVersion="2"), pod)
    assert [p.name for p in cache.snapshot.pods_on("n1")] == ["p"]
    assert "ns/p" not in cache.queue, "a stale update must never queue a bound pod again"


def test_heartbeat_does_not_wake_parked_pods_but_new_capacity_does(cache: ClusterCache) -> None:
    old = make_node("n1")
    cache.apply("Node", ADDED, old, None)
    cache.apply("Pod", ADDED, make_pod("p"), None)
    info = cache.queue.pop_nowait()
    assert info is not None
    cache.queue.requeue(info, unschedulable=True)
    beat = make_node("n1", heartbeat="t1")
    cache.apply("Node", MODIFIED, beat, old)
    assert cache.queue.counts()["unschedulable"] == 1
    bigger = make_node("n1", cpu="8", heartbeat="t2")
    cache.apply("Node", MODIFIED, bigger, beat)
    assert cache.queue.counts()["unschedulable"] == 0


def test_deleting_an_assigned_pod_wakes_parked_pods(cache: ClusterCache) -> None:
    cache.apply("Node", ADDED, make_node("n1"), None)
    victim = make_pod("victim", node="n1", scheduler="other")
    cache.apply("Pod", ADDED, victim, None)
    cache.apply("Pod", ADDED, make_pod("p"), None)
    info = cache.queue.pop_nowait()
    assert info is not None
    cache.queue.requeue(info, unschedulable=True)
    cache.apply("Pod", DELETED, victim, victim)
    assert cache.queue.counts()["unschedulable"] == 0
    assert cache.snapshot.pods_on("n1") == []


def test_node_change_classification() -> None:
    assert node_change(make_node("n"), make_node("n", heartbeat="later")) == frozenset()
    assert node_change(make_node("n"), make_node("n", zone="a")) == {"labels"}
    tainted = make_node("n")
    tainted["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    assert node_change(make_node("n"), tainted) == {"taints"}


def test_relist_turns_differences_into_events() -> None:
    seen: list[tuple[str, str]] = []
    informer = Informer(kube=None, resource=None,  # type: ignore[arg-type]
                        apply=lambda kind, event, obj, old: seen.append(
                            (event, obj["metadata"]["name"])))
    informer.resource = type("R", (), {"kind": "Pod"})()  # type: ignore[assignment]
    informer.replace([make_pod("a"), make_pod("b")], initial=True)
    assert seen == []
    informer.replace([make_pod("b", resourceVersion="2"), make_pod("c")], initial=False)
    assert sorted(seen) == [("ADDED", "c"), ("DELETED", "a"), ("MODIFIED", "b")]


def test_status_churn_on_a_bound_pod_costs_no_snapshot_update(cache: ClusterCache) -> None:
    cache.apply("Node", ADDED, make_node("n1"), None)
    bound = make_pod("p", node="n1")
    cache.apply("Pod", ADDED, bound, None)
    view = cache.snapshot.get_pod("uid-p")
    running = {**bound, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    cache.apply("Pod", MODIFIED, running, bound)
    assert cache.snapshot.get_pod("uid-p") is view
    relabelled = make_pod("p", node="n1", labels={"app": "web"})
    cache.apply("Pod", MODIFIED, relabelled, running)
    updated = cache.snapshot.get_pod("uid-p")
    assert updated is not view and updated is not None and updated.labels == {"app": "web"}


def test_an_unreadable_object_is_skipped_not_fatal(cache: ClusterCache) -> None:
    broken = make_pod("broken", node="n1", cpu="lots")
    cache.apply("Pod", ADDED, broken, None)  # logged, skipped
    cache.apply("Pod", ADDED, make_pod("fine"), None)
    assert "ns/fine" in cache.queue


def test_initial_list_is_retried_not_fatal() -> None:
    """A timed-out first list (an overloaded API server) delays the start; the process used to
    end with the KubeError. client-go's reflector retries ListAndWatch the same way
    (tools/cache/reflector.go, Run: wait.BackoffUntil)."""
    import asyncio

    from berthmaster.foundation.kube import KubeError

    class Flaky:
        calls = 0

        async def request(self, method: str, path: str, params: Any) -> JSON:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise KubeError(0, "ConnectionError", "GET /api/v1/nodes: TimeoutError()")
            return {"items": [make_node("n1")], "metadata": {"resourceVersion": "9"}}

    resource = next(r for r in RESOURCES if r.kind == "Node")
    informer = Informer(Flaky(), resource, lambda *_: None)  # type: ignore[arg-type]
    items = asyncio.run(ClusterCache._first_list(informer))
    assert Flaky.calls == 2 and [i["metadata"]["name"] for i in items] == ["n1"]


def test_plugin_kinds_are_held_and_their_changes_are_cluster_events() -> None:
    """A kind a plugin asked to have watched (framework.Watched) is held in the snapshot and
    each change is "<Kind>/Add|Update|Delete"; a pending pod's arrival is "Pod/Add" only when
    a profile waits at Permit (eventhandlers.go, addPodToSchedulingQueue, under the
    GangScheduling gate)."""
    from berthmaster.scheduler.plugins.coscheduling import POD_GROUP

    seen: list[str] = []
    queue = SchedulingQueue()
    queue.move_for_event = lambda event: seen.append(event.kind) or 0  # type: ignore[method-assign]
    cache = ClusterCache(kube=None, snapshot=Snapshot(), queue=queue,  # type: ignore[arg-type]
                         scheduler_name="berthmaster", watches=[POD_GROUP])
    group = {"metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1"},
             "spec": {"minMember": 2}}
    cache.apply("PodGroup", ADDED, group, None)
    assert cache.snapshot.object("PodGroup", "ns", "g") == group
    cache.apply("PodGroup", MODIFIED, group, group)
    cache.apply("Pod", ADDED, make_pod("first"), None)
    cache.pending_pod_events = True
    cache.apply("Pod", ADDED, make_pod("second"), None)
    cache.apply("PodGroup", DELETED, group, group)
    assert cache.snapshot.object("PodGroup", "ns", "g") is None
    assert seen == ["PodGroup/Add", "PodGroup/Update", "UnscheduledPodAdd", "PodGroup/Delete"]
    assert any(i.resource.kind == "PodGroup" and i.resource.path ==
               "/apis/scheduling.x-k8s.io/v1alpha1/podgroups" for i in cache.informers)


def _resized(pod: JSON, cpu: str) -> JSON:
    """``pod`` once the kubelet actuated an in-place resize of its container to ``cpu``."""
    container = {**pod["spec"]["containers"][0], "resources": {"requests": {"cpu": cpu}}}
    return {**pod, "metadata": {**pod["metadata"], "resourceVersion": str(cpu)},
            "spec": {**pod["spec"], "containers": [container]},
            "status": {"containerStatuses": [{"name": "c", "resources": {
                "requests": {"cpu": cpu}}, "allocatedResources": {"cpu": cpu}}]}}


def test_a_bound_pod_scaling_down_wakes_a_pod_that_wants_what_it_gave_back(
        cache: ClusterCache) -> None:
    """pkg/scheduler/framework/events.go extractPodScaleDown and noderesources/fit.go
    isSchedulableAfterPodScaleDown: a resize down of a bound pod retries the pods parked for
    resources; a resize up does not."""
    cache.apply("Node", ADDED, make_node("n1"), None)
    big = _resized(make_pod("big", node="n1", scheduler="other", cpu="3"), "3")
    cache.apply("Pod", ADDED, big, None)
    cache.apply("Pod", ADDED, make_pod("p", cpu="2"), None)
    info = cache.queue.pop_nowait()
    assert info is not None
    cache.queue.requeue(info, unschedulable=True)
    bigger = _resized(big, "4")
    cache.apply("Pod", MODIFIED, bigger, big)
    assert cache.queue.counts()["unschedulable"] == 1
    assert cache.snapshot.get_pod("uid-big").requests == {"cpu": 4000}  # type: ignore[union-attr]
    smaller = _resized(bigger, "1")
    cache.apply("Pod", MODIFIED, smaller, bigger)
    assert cache.queue.counts()["unschedulable"] == 0
    assert cache.snapshot.get_pod("uid-big").requests == {"cpu": 1000}  # type: ignore[union-attr]
