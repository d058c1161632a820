"""The campaign's invariants as tables: each rule flags what it must and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.model import NodeView, PodView
from berthmaster.tooling.chaos import invariants as rules
from tests.support.builders import make_node, make_pod, pod_affinity_term, taint, toleration

ZONE = "topology.kubernetes.io/zone"


def views(*pods: dict[str, Any]) -> list[PodView]:
    return [PodView.from_dict(p) for p in pods]


def zoned(name: str, zone: str, **kwargs: Any) -> NodeView:
    return NodeView.from_dict(make_node(name, labels={ZONE: zone}, **kwargs))


@pytest.mark.parametrize(("first", "now", "breach"), [
    (None, "n1", False), ("n1", "n1", False), ("n1", "", False), ("n1", "n2", True)])
def test_rebinding(first: str | None, now: str, breach: bool) -> None:
    assert (rules.rebinding(first, now) is not None) == breach


@pytest.mark.parametrize(("counts", "breach"), [([1], False), ([2], True), ([1, 1], True)])
def test_scheduled_twice(counts: list[int], breach: bool) -> None:
    assert (rules.scheduled_twice("ns/p", counts) is not None) == breach


@pytest.mark.parametrize(("pods", "expected"), [
    ([make_pod("a", cpu="2", node_name="n"), make_pod("b", cpu="2", node_name="n")], []),
    ([make_pod("a", cpu="3", node_name="n"), make_pod("b", cpu="2", node_name="n")],
     ["node n: cpu requested 5000 > allocatable 4000"]),
    # a pod on another node, a finished one and one being deleted hold nothing here
    ([make_pod("a", cpu="3", node_name="n"), make_pod("b", cpu="2", node_name="other"),
      make_pod("c", cpu="2", node_name="n", phase="Succeeded")], []),
    ([make_pod("a", requests={"example.com/gpu": "1"}, node_name="n"),
      make_pod("b", requests={"example.com/gpu": "1"}, node_name="n")],
     ["node n: example.com/gpu requested 2 > allocatable 1"]),
    ([make_pod("a", host_ports=[8080], node_name="n"),
      make_pod("b", host_ports=[8080], node_name="n")],
     ["node n: host port TCP/8080 (0.0.0.0) used by 2 pods"]),
    ([make_pod(f"p{i}", node_name="n") for i in range(3)],
     ["node n: pods requested 3 > allocatable 2"]),
])
def test_overcommit(pods: list[dict[str, Any]], expected: list[str]) -> None:
    node = NodeView.from_dict(make_node("n", cpu="4", pods="2" if len(pods) == 3 else "110",
                                        extended={"example.com/gpu": "1"}))
    assert rules.overcommit(node, views(*pods)) == expected


def test_a_pod_being_deleted_holds_nothing() -> None:
    leaving = make_pod("a", cpu="3", node_name="n")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    node = NodeView.from_dict(make_node("n", cpu="4"))
    assert rules.overcommit(node, views(leaving, make_pod("b", cpu="2", node_name="n"))) == []


@pytest.mark.parametrize(("taints", "tolerations", "breach"), [
    ([], [], False),
    ([taint("dedicated", "x")], [], True),
    ([taint("dedicated", "x", "PreferNoSchedule")], [], False),
    ([taint("dedicated", "x")], [toleration("dedicated", "x", "NoSchedule", "Equal")], False),
    ([taint("dedicated", "x", "NoExecute")], [toleration("dedicated", operator="Exists")], False),
    ([taint("dedicated", "x")], [toleration("other", operator="Exists")], True),
])
def test_untolerated(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]],
                     breach: bool) -> None:
    pod = PodView.from_dict(make_pod(tolerations=tolerations))
    node = NodeView.from_dict(make_node(taints=taints))
    assert (rules.untolerated(pod, node) is not None) == breach


@pytest.mark.parametrize(("pod", "breach"), [
    (make_pod(), False),
    (make_pod(node_selector={"disk": "ssd"}), False),
    (make_pod(node_selector={"disk": "hdd"}), True),
    (make_pod(required_node_terms=[[{"key": "disk", "operator": "In", "values": ["ssd"]}]]),
     False),
    (make_pod(required_node_terms=[[{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]]),
     True),
])
def test_node_affinity_mismatch(pod: dict[str, Any], breach: bool) -> None:
    node = NodeView.from_dict(make_node("n", labels={"disk": "ssd"}))
    assert (rules.node_affinity_mismatch(PodView.from_dict(pod), node) is not None) == breach


ANTI = pod_affinity_term({"app": "web"})


@pytest.mark.parametrize(("pod", "others", "breach"), [
    (make_pod("new", labels={"app": "web"}, pod_anti_affinity=[ANTI]),
     [make_pod("old", labels={"app": "web"}, node_name="n2")], False),
    (make_pod("new", labels={"app": "web"}, pod_anti_affinity=[ANTI]),
     [make_pod("old", labels={"app": "web"}, node_name="n1")], True),
    # symmetric: the placed pod's term rejects the newcomer
    (make_pod("new", labels={"app": "web"}),
     [make_pod("old", labels={"app": "db"}, node_name="n1", pod_anti_affinity=[ANTI])], True),
    # other namespaces are not selected by a term without namespaces
    (make_pod("new", labels={"app": "web"}, pod_anti_affinity=[ANTI]),
     [make_pod("old", "elsewhere", labels={"app": "web"}, node_name="n1")], False),
    # the zone key: n1 and n3 share zone-a
    (make_pod("new", labels={"app": "web"},
              pod_anti_affinity=[pod_affinity_term({"app": "web"}, ZONE)]),
     [make_pod("old", labels={"app": "web"}, node_name="n3")], True),
])
def test_anti_affinity_violation(pod: dict[str, Any], others: list[dict[str, Any]],
                                 breach: bool) -> None:
    nodes = {"n1": zoned("n1", "a"), "n2": zoned("n2", "b"), "n3": zoned("n3", "a")}
    found = rules.anti_affinity_violation(PodView.from_dict(pod), nodes["n1"], views(*others),
                                          nodes)
    assert (found is not None) == breach


def spread_pod(name: str, node: str | None = None) -> dict[str, Any]:
    return make_pod(name, labels={"app": "s"}, node_name=node, spread=[{
        "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule", "topologyKey": ZONE,
        "labelSelector": {"matchLabels": {"app": "s"}}}])


@pytest.mark.parametrize(("placed", "gone", "breach"), [
    ([], [], False),
    (["n1"], [], True),  # a:1 -> a:2 against b:0, skew 2
    (["n2"], [], False),
    (["n1", "n2"], [], False),
    (["n3", "n2"], [], False),  # n1 and n3 share zone a
    (["n1", "n3", "n2"], [], True),
    # one pod in zone b left a moment ago: the scheduler may still count it
    (["n1"], ["n2"], False),
])
def test_spread_violation(placed: list[str], gone: list[str], breach: bool) -> None:
    nodes = {"n1": zoned("n1", "a"), "n2": zoned("n2", "b"), "n3": zoned("n3", "a")}
    others = views(*[spread_pod(f"p{i}", n) for i, n in enumerate(placed)])
    recent = views(*[spread_pod(f"g{i}", n) for i, n in enumerate(gone)])
    found = rules.spread_violation(PodView.from_dict(spread_pod("new")), nodes["n1"], others,
                                   nodes, recent)
    assert (found is not None) == breach


def test_bind_breaches_name_the_pod_and_node() -> None:
    pod = PodView.from_dict(make_pod("p", node_selector={"disk": "hdd"}))
    node = NodeView.from_dict(make_node("n", taints=[taint("k", "v")]))
    found = rules.bind_breaches(pod, node, [], {"n": node})
    assert [f.split(": ")[1] for f in found] == ["untolerated taint k=v:NoSchedule",
                                                 "nodeSelector disk=hdd does not match node n"]
    assert rules.bind_breaches(pod, None, [], {}) == []


T = rules.Takeover


@pytest.mark.parametrize(("reporter", "at", "takeovers", "breach"), [
    ("a", 10.0, [], False),
    ("a", 10.0, [T(20.0, "a", "b")], False),  # bound before it lost the Lease
    ("a", 21.0, [T(20.0, "a", "b")], False),  # within the grace: a bind in flight
    ("a", 25.0, [T(20.0, "a", "b")], True),
    ("b", 25.0, [T(20.0, "a", "b")], False),
    ("a", 35.0, [T(20.0, "a", "b"), T(30.0, "b", "a")], False),  # it won the Lease back
])
def test_bind_after_lost_lease(reporter: str, at: float, takeovers: list[rules.Takeover],
                               breach: bool) -> None:
    assert (rules.bind_after_lost_lease(reporter, at, takeovers, 2.0) is not None) == breach


@pytest.mark.parametrize(("spec", "expected", "minimum"), [
    ({"minAvailable": 2}, 3, 2), ({"minAvailable": "50%"}, 3, 2),
    ({"maxUnavailable": 1}, 3, 2), ({"maxUnavailable": "50%"}, 3, 1), ({}, 3, None)])
def test_pdb_minimum(spec: dict[str, Any], expected: int, minimum: int | None) -> None:
    assert rules.pdb_minimum({"spec": spec}, expected) == minimum


@pytest.mark.parametrize(("before", "after", "breach"), [
    (3, 2, False), (2, 1, True), (1, 0, False)])  # a budget already broken is not ours
def test_pdb_breach(before: int, after: int, breach: bool) -> None:
    assert (rules.pdb_breach("ns/guarded", 2, before, after, "ns/p") is not None) == breach


def test_healthy_means_running_ready_and_staying() -> None:
    pod = make_pod(phase="Running")
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert rules.healthy(pod)
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not rules.healthy(pod)


def machine(pre_drain: list[str] = (), pre_terminate: list[str] = (), deleting: bool = False,
            drain_started: bool = False, drained: bool = False, message: str = ""
            ) -> dict[str, Any]:
    hooks = {"preDrain": [{"name": h, "owner": "o"} for h in pre_drain],
             "preTerminate": [{"name": h, "owner": "o"} for h in pre_terminate]}
    status: dict[str, Any] = {"conditions": [{"type": "Drained",
                                              "status": "True" if drained else "False",
                                              "message": message}]}
    if drain_started:
        status["deletionProgress"] = {"drainStartedAt": "2026-01-01T00:00:00Z"}
    meta: dict[str, Any] = {"name": "m"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"lifecycleHooks": hooks}, "status": status}


@pytest.mark.parametrize(("obj", "breach"), [
    (machine(["h"], deleting=True), False),
    (machine(["h"], deleting=True, drain_started=True), True),
    (machine(["h"], deleting=True, drained=True), True),
    (machine([], ["t"], deleting=True, drain_started=True, drained=True), False),
    (machine(["h"], deleting=True, drained=True, message="Node drain skipped"), False),
])
def test_machine_breaches(obj: dict[str, Any], breach: bool) -> None:
    assert bool(rules.machine_breaches(obj)) == breach


@pytest.mark.parametrize(("obj", "exists", "breach"), [
    (machine(pre_terminate=["t"], deleting=True), True, False),
    (machine(pre_terminate=["t"], deleting=True), False, True),
    (machine(deleting=True), False, False),
    (machine(pre_terminate=["t"]), False, False),  # not being deleted: a node fault, not ours
])
def test_instance_gone_early(obj: dict[str, Any], exists: bool, breach: bool) -> None:
    assert (rules.instance_gone_early(obj, exists) is not None) == breach


@pytest.mark.parametrize(("events", "expected"), [
    ([("DrainProceeds", 1, "t1"), ("Deleted", 1, "t2"), ("DrainSucceeded", 1, "t2")], []),
    ([("DrainProceeds", 2, "t1")],
     ["Machine m: DrainProceeds happened 2 times after 0 DrainRequeued"]),
    ([("DrainProceeds", 1, "t1"), ("DrainProceeds", 1, "t2")],
     ["Machine m: DrainProceeds happened 2 times after 0 DrainRequeued"]),
    # a drain attempt that failed (a PDB refused past the attempt's timeout) is retried: one
    # DrainProceeds per attempt, each failed one followed by DrainRequeued
    ([("DrainProceeds", 2, "t1"), ("DrainRequeued", 1, "t2"), ("Deleted", 1, "t3"),
      ("DrainSucceeded", 1, "t3")], []),
    ([("DrainProceeds", 3, "t1"), ("DrainRequeued", 1, "t2")],
     ["Machine m: DrainProceeds happened 3 times after 1 DrainRequeued"]),
    ([("Deleted", 2, "t1")], ["Machine m: Deleted happened 2 times"]),
    ([("DrainSucceeded", 1, "t1"), ("Deleted", 1, "t2")],
     ["Machine m: DrainSucceeded (t1) before Deleted (t2)"]),
    ([("Deleted", 1, "t1"), ("DrainProceeds", 1, "t2")],
     ["Machine m: Deleted (t1) before DrainProceeds (t2)"]),
    ([("Created", 3, "t0")], []),
])
def test_deletion_event_breaches(events: list[tuple[str, int, str]],
                                 expected: list[str]) -> None:
    assert rules.deletion_event_breaches("m", events) == expected


def machine_set(replicas: int, low: str | None = "1", high: str | None = "3"
                ) -> dict[str, Any]:
    notes = {}
    if low is not None:
        notes[rules.MIN_SIZE_KEY] = low
    if high is not None:
        notes[rules.MAX_SIZE_KEY] = high
    return {"metadata": {"name": "ms", "annotations": notes}, "spec": {"replicas": replicas}}


@pytest.mark.parametrize(("obj", "breach"), [
    (machine_set(1), False), (machine_set(3), False), (machine_set(0), True),
    (machine_set(4), True), (machine_set(9, None, None), False)])
def test_replicas_breach(obj: dict[str, Any], breach: bool) -> None:
    assert (rules.replicas_breach(obj) is not None) == breach


@pytest.mark.parametrize(("replicas", "others", "limit", "breach"), [
    ([2, 3], 5, 10, False), ([3, 3], 5, 10, True), ([9], 9, None, False)])
def test_cluster_limit_breach(replicas: list[int], others: int, limit: int | None,
                              breach: bool) -> None:
    sets = [machine_set(r) for r in replicas]
    assert (rules.cluster_limit_breach(sets, others, limit) is not None) == breach


def pending(message: str | None) -> dict[str, Any]:
    pod = make_pod("p")
    if message is not None:
        pod["status"] = {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message}]}
    return pod


@pytest.mark.parametrize(("pod", "last_event", "breach"), [
    (pending("0/5 nodes are available: 5 Insufficient cpu."), 50.0, False),
    (pending("0/5 nodes are available: 5 Insufficient cpu."), None, True),
    (pending(None), 150.0, True),
    # no event since the last fault (t=100), and a message about 4 nodes: out of date
    (pending("0/4 nodes are available: 4 Insufficient cpu."), 50.0, True),
    (pending("0/4 nodes are available: 4 Insufficient cpu."), 150.0, False),
])
def test_stale_reason(pod: dict[str, Any], last_event: float | None, breach: bool) -> None:
    assert (rules.stale_reason(pod, 5, last_event, 100.0) is not None) == breach


@pytest.mark.parametrize(("start", "end", "breach"), [
    (100_000, 150_000, False), (100_000, 100_000 + 96 * 1024, True), (200_000, 100_000, False)])
def test_rss_breach(start: int, end: int, breach: bool) -> None:
    assert (rules.rss_breach("operator", start, end, 96 * 1024) is not None) == breach


# ------------------------------------------------------------------ memory over the run


def test_rss_summary_spans_restarts() -> None:
    lives = {("operator", 10): [100, 140, 120], ("etcd", 5): [50, 60],
             ("operator", 11): [90, 150, 95], ("operator", 12): []}
    assert rules.rss_summary(lives) == {"operator": (100, 150, 95, 2), "etcd": (50, 60, 60, 1)}


def test_rss_growth_over_the_run_is_judged_across_lives() -> None:
    """Each life grows 40 MiB (under a 64 MiB bound per life), but each starts bigger: the
    component grew 120 MiB over the run."""
    from berthmaster.tooling.chaos.campaign import Rss, rss_bound
    mib = 1024
    rss = Rss(lives={("operator", p): [(100 + 40 * i) * mib, (140 + 40 * i) * mib]
                     for i, p in enumerate((1, 2, 3))})
    assert rss.per_component() == {"operator": (100 * mib, 220 * mib, 220 * mib, 3)}
    assert rss_bound("operator") == 96 * mib
    assert rss.breaches() == ["operator over the run (3 lives, at its largest): RSS grew "
                              "100 -> 220 MiB (bound 96 MiB)"]


# ------------------------------------------------------------------ Machine API liveness


@pytest.mark.parametrize(("obj", "unblocked"), [
    (machine(), False), (machine(deleting=True), True),
    (machine(["WaitForReplacement"], deleting=True), False),
    (machine(pre_terminate=["FlushLogs"], deleting=True), False),
])
def test_deletion_unblocked(obj: dict[str, Any], unblocked: bool) -> None:
    assert rules.deletion_unblocked(obj) is unblocked


def converging_set(wanted: int, have: int, ready: int, generation: int = 2,
                observed: int = 2) -> dict[str, Any]:
    return {"metadata": {"name": "pool-a", "generation": generation},
            "spec": {"replicas": wanted},
            "status": {"replicas": have, "readyReplicas": ready,
                       "observedGeneration": observed}}


@pytest.mark.parametrize(("obj", "converged"), [
    (converging_set(2, 2, 2), True), (converging_set(0, 0, 0), True),
    (converging_set(3, 2, 2), False),  # scaling up
    (converging_set(2, 3, 3), False),  # scaling down
    (converging_set(2, 2, 1), False),  # a Machine not ready
    (converging_set(2, 2, 2, generation=3), False),  # the controller has not seen the change
    ({"metadata": {"name": "new"}, "spec": {"replicas": 1}}, False),
])
def test_machine_set_converged(obj: dict[str, Any], converged: bool) -> None:
    assert rules.machine_set_converged(obj) is converged


@pytest.mark.parametrize(("since", "now", "expected"), [
    (None, 1000.0, None), (100.0, 280.0, None),
    (100.0, 281.0, "Machine m: not gone within 180s")])
def test_overdue(since: float | None, now: float, expected: str | None) -> None:
    assert rules.overdue("Machine m: not gone", since, now, 180.0) == expected
