"""Which pods are protected, the eviction order, the limits and the Event on an evicted pod."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.descheduler.context import (
    Candidate,
    ClusterState,
    StrategyContext,
    Tally,
)
from berthmaster.scheduler.descheduler.evictor import EvictionBook, build_event, build_eviction
from berthmaster.scheduler.descheduler.protection import (
    EvictorSettings,
    eviction_order,
    protection_reasons,
    qos_class,
)
from tests.unit.descheduler.builders import NOW, make_node, make_pod

DEFAULT = EvictorSettings()


@pytest.mark.parametrize(("pod", "settings", "reason"), [
    (make_pod("p", "n"), DEFAULT, None),
    (make_pod("p", "n", annotations={"scheduler.alpha.kubernetes.io/critical-pod": "true"}),
     DEFAULT, "pod has system critical priority and is protected against eviction"),
    (make_pod("p", "n", priority=2_000_000_000), DEFAULT,
     "pod has system critical priority and is protected against eviction"),
    (make_pod("p", "n", priority=2_000_000_000), EvictorSettings(evict_system_critical_pods=True),
     None),
    (make_pod("p", "n", priority=500), EvictorSettings(priority_threshold=500),
     "pod has higher priority than specified priority class threshold"),
    (make_pod("p", "n", priority=499), EvictorSettings(priority_threshold=500), None),
    (make_pod("p", "n", annotations={"kubernetes.io/config.mirror": "x"}), DEFAULT,
     "pod is a mirror pod"),
    (make_pod("p", "n", annotations={"kubernetes.io/config.source": "file"}), DEFAULT,
     "pod is a static pod"),
    (make_pod("p", "n", owner=None), DEFAULT, "pod does not have any ownerRefs"),
    (make_pod("p", "n", owner=None, phase="Failed"), EvictorSettings(evict_failed_bare_pods=True),
     None),
    (make_pod("p", "n", owner=None), EvictorSettings(evict_failed_bare_pods=True),
     "pod does not have any ownerRefs and is not in failed phase"),
    (make_pod("p", "n", owner_kind="DaemonSet"), DEFAULT,
     "daemonset pods are protected against eviction"),
    (make_pod("p", "n", volumes=[{"name": "v", "emptyDir": {}}]), DEFAULT,
     "pod has local storage and is protected against eviction"),
    (make_pod("p", "n", volumes=[{"name": "v", "hostPath": {"path": "/x"}}]), DEFAULT,
     "pod has local storage and is protected against eviction"),
    (make_pod("p", "n", volumes=[{"name": "v", "emptyDir": {}}]),
     EvictorSettings(evict_local_storage_pods=True), None),
    (make_pod("p", "n", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
     EvictorSettings(ignore_pvc_pods=True), "pod with PVC is protected against eviction"),
    (make_pod("p", "n", owner=None, annotations={"descheduler.alpha.kubernetes.io/evict": ""}),
     DEFAULT, None),
])
def test_protection(pod: dict[str, Any], settings: EvictorSettings, reason: str | None) -> None:
    reasons = protection_reasons(pod, settings, settings.priority_threshold)
    assert (reasons[0] if reasons else None) == reason


def test_terminating_pods_are_protected() -> None:
    pod = make_pod("p", "n")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert protection_reasons(pod, DEFAULT, None) == ["pod is terminating"]


def test_order_is_priority_then_best_effort_burstable_guaranteed() -> None:
    guaranteed = make_pod("g", "n")
    guaranteed["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    burstable = make_pod("b", "n", cpu="100m")
    best_effort = make_pod("e", "n")
    high_best_effort = make_pod("h", "n", priority=10)
    low = make_pod("l", "n", priority=1, cpu="1")
    assert [qos_class(p) for p in (guaranteed, burstable, best_effort)] == [
        "Guaranteed", "Burstable", "BestEffort"]
    ordered = sorted([high_best_effort, guaranteed, low, burstable, best_effort],
                     key=eviction_order)
    assert [p["metadata"]["name"] for p in ordered] == ["e", "b", "g", "l", "h"]


def context(settings: EvictorSettings = DEFAULT, fits: bool = True) -> StrategyContext:
    state = ClusterState([make_node("n1"), make_node("n2")], [], node_fit=lambda p, n: fits,
                         now=NOW)
    return StrategyContext(state, settings, Tally("S"))


@pytest.mark.parametrize(("book", "pods", "refused"), [
    (EvictionBook(per_node=1), [("a", "n1", "x"), ("b", "n1", "x"), ("c", "n2", "x")], ["b"]),
    (EvictionBook(per_namespace=1), [("a", "n1", "x"), ("b", "n2", "x"), ("c", "n2", "y")],
     ["b"]),
    (EvictionBook(total=2), [("a", "n1", "x"), ("b", "n2", "y"), ("c", "n2", "z")], ["c"]),
])
def test_limits(book: EvictionBook, pods: list[tuple[str, str, str]], refused: list[str]) -> None:
    ctx = context()
    got = []
    for name, node, namespace in pods:
        candidate = Candidate(make_pod(name, node, namespace=namespace), "test")
        if book.refusal(candidate, ctx):
            got.append(name)
        else:
            book.record(candidate)
    assert got == refused


def test_node_fit_refuses_pods_that_fit_nowhere_else() -> None:
    ctx = context(EvictorSettings(node_fit=True), fits=False)
    reason = EvictionBook().refusal(Candidate(make_pod("a", "n1"), "x"), ctx)
    assert reason is not None and reason.startswith("pod does not fit on any other node")
    assert EvictionBook().refusal(Candidate(make_pod("a", "n1"), "x"),
                                  context(EvictorSettings(node_fit=True))) is None


def test_eviction_and_event_bodies_use_upstream_strings() -> None:
    pod = make_pod("web-1", "n1", namespace="shop")
    assert build_eviction(pod) == {"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": "web-1", "namespace": "shop"}}
    event = build_event(pod, "RemoveDuplicates", NOW)
    assert event["reason"] == "RemoveDuplicates"
    assert event["action"] == "Descheduled"
    assert event["note"] == "pod evicted from n1 node by sigs.k8s.io/descheduler"
    assert event["regarding"]["name"] == "web-1" and event["eventTime"].endswith("Z")
