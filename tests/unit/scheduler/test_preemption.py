"""Preemption choice: victims, PDBs, node ordering, preemptionPolicy, messages."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.preemption import (
    choose_preemption,
    evaluate_preemption,
    failed_scheduling_message,
)
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, taint


def _pdb(name: str, labels: dict[str, str], allowed: int) -> dict[str, Any]:
    return {"kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed}}


def _names(victims: list[dict[str, Any]]) -> list[str]:
    return [v["metadata"]["name"] for v in victims]


def run(nodes, pods, pod, **objects):
    snap = Snapshot.build(nodes=nodes, pods=pods, **objects)
    before = snap.describe()
    engine = Engine(seed=0)
    decision = engine.schedule(pod, snap)
    assert decision.node is None
    result = evaluate_preemption(pod, snap, engine, decision)
    assert snap.describe() == before  # what-if removals were undone
    return decision, result


def test_only_lower_priority_pods_and_minimal_victims():
    nodes = [make_node("n1", cpu="4")]
    pods = [make_pod("low1", cpu="1", priority=1, node_name="n1", created="2024-01-01T00:00:00Z"),
            make_pod("low2", cpu="1", priority=2, node_name="n1", created="2024-01-01T00:00:00Z"),
            make_pod("high", cpu="2", priority=100, node_name="n1")]
    _, result = run(nodes, pods, make_pod("p", cpu="1", priority=50))
    assert result.preemption is not None
    assert result.preemption.node == "n1"
    assert _names(result.preemption.victims) == ["low1"]  # low2 is reprieved first (higher)


def test_equal_or_higher_priority_never_preempted():
    nodes = [make_node("n1", cpu="1")]
    pods = [make_pod("same", cpu="1", priority=50, node_name="n1")]
    decision, result = run(nodes, pods, make_pod("p", cpu="1", priority=50))
    assert result.preemption is None
    assert failed_scheduling_message(decision, result) == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_not_helpful_for_unresolvable_nodes():
    nodes = [make_node("n1", taints=[taint("k", "v")]), make_node("n2", unschedulable=True)]
    _, result = run(nodes, [], make_pod("p", priority=10))
    assert result.preemption is None
    assert result.message == ("no new claims to deallocate, preemption: 0/2 nodes are "
                              "available: 2 Preemption is not helpful for scheduling.")


def test_preemption_policy_never():
    nodes = [make_node("n1", cpu="1")]
    pods = [make_pod("low", cpu="1", priority=0, node_name="n1")]
    pod = make_pod("p", cpu="1", priority=10, preemption_policy="Never")
    _, result = run(nodes, pods, pod)
    assert result.preemption is None
    assert result.message == ("no new claims to deallocate, preemption: not eligible due to "
                              "preemptionPolicy=Never.")


def test_pdb_violating_victims_avoided_then_fewest_violations():
    nodes = [make_node("n1", cpu="2"), make_node("n2", cpu="2")]
    pods = [make_pod("guarded", cpu="2", priority=1, labels={"app": "db"}, node_name="n1"),
            make_pod("free", cpu="2", priority=5, labels={"app": "web"}, node_name="n2")]
    _, result = run(nodes, pods, make_pod("p", cpu="2", priority=10),
                    pdbs=[_pdb("db", {"app": "db"}, 0)])
    assert result.preemption.node == "n2"  # no PDB violation beats a lower victim priority
    assert result.preemption.pdb_violations == 0


def test_pdb_violated_when_nothing_else_helps():
    nodes = [make_node("n1", cpu="2")]
    pods = [make_pod("guarded", cpu="2", priority=1, labels={"app": "db"}, node_name="n1")]
    _, result = run(nodes, pods, make_pod("p", cpu="2", priority=10),
                    pdbs=[_pdb("db", {"app": "db"}, 0)])
    assert result.preemption.node == "n1" and result.preemption.pdb_violations == 1


def test_node_order_lowest_highest_victim_then_sum_then_count_then_latest_start():
    def scenario(n1_pods, n2_pods):
        nodes = [make_node("n1", cpu="2"), make_node("n2", cpu="2")]
        pods = [make_pod(f"a{i}", node_name="n1", **kw) for i, kw in enumerate(n1_pods)] + \
               [make_pod(f"b{i}", node_name="n2", **kw) for i, kw in enumerate(n2_pods)]
        snap = Snapshot.build(nodes=nodes, pods=pods)
        return choose_preemption(make_pod("p", cpu="2", priority=100), snap, Engine()).node

    # lowest highest-victim priority
    assert scenario([{"cpu": "2", "priority": 5}], [{"cpu": "2", "priority": 3}]) == "n2"
    # same highest, smaller sum
    assert scenario([{"cpu": "1", "priority": 5}, {"cpu": "1", "priority": 4}],
                    [{"cpu": "1", "priority": 5}, {"cpu": "1", "priority": 1}]) == "n2"
    # everything equal: latest start time of the highest-priority victims
    assert scenario([{"cpu": "2", "priority": 3, "created": "2024-01-01T00:00:00Z"}],
                    [{"cpu": "2", "priority": 3, "created": "2024-06-01T00:00:00Z"}]) == "n2"


def test_fewer_victims_wins():
    nodes = [make_node("n1", cpu="2"), make_node("n2", cpu="2")]
    pods = [make_pod("a1", cpu="1", priority=0, node_name="n1"),
            make_pod("a2", cpu="1", priority=0, node_name="n1"),
            make_pod("b1", cpu="2", priority=0, node_name="n2")]
    snap = Snapshot.build(nodes=nodes, pods=pods)
    chosen = choose_preemption(make_pod("p", cpu="2", priority=10), snap, Engine())
    assert chosen.node == "n2" and _names(chosen.victims) == ["b1"]


def test_anti_affinity_resolved_by_preemption():
    from tests.support.builders import pod_affinity_term
    nodes = [make_node("n1")]
    pods = [make_pod("x", labels={"app": "x"}, priority=0, node_name="n1")]
    pod = make_pod("p", priority=10, pod_anti_affinity=[pod_affinity_term({"app": "x"})])
    _, result = run(nodes, pods, pod)
    assert result.preemption.node == "n1" and _names(result.preemption.victims) == ["x"]


@pytest.mark.parametrize(("nodes", "pods", "pod", "want"), [
    # node a: its 1 CPU is taken by an equal-priority pod (no victims); b: an untolerated
    # taint, unresolvable, so never tried (not helpful); c: a higher-priority pod holds the
    # port, so once its low-priority pod is gone it still counts the first filter failing
    # (ports), and only that one, before and after
    ([make_node("a", cpu="1"), make_node("b", taints=[taint("k", "v")]),
      make_node("c", cpu="1")],
     [make_pod("same", cpu="1", priority=10, node_name="a"),
      make_pod("port", host_ports=[80], priority=20, node_name="c", cpu="0"),
      make_pod("low", cpu="1", priority=1, node_name="c")],
     make_pod("p", cpu="1", priority=10, host_ports=[80]),
     "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't have free ports for the "
     "requested pod ports, 1 node(s) had untolerated taint(s). no new claims to deallocate, "
     "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
     "1 Preemption is not helpful for scheduling, 1 node(s) didn't have free ports for the "
     "requested pod ports."),
    ([make_node("a", cpu="1"), make_node("c", cpu="1")],
     [make_pod("same", cpu="1", priority=10, node_name="a"),
      make_pod("port", host_ports=[80], priority=20, node_name="c", cpu="0"),
      make_pod("low", cpu="1", priority=1, node_name="c")],
     make_pod("p", cpu="1", priority=10, host_ports=[80]),
     "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't have free ports for the "
     "requested pod ports. no new claims to deallocate, preemption: 0/2 nodes are available: "
     "1 No preemption victims found for incoming pod, 1 node(s) didn't have free ports for "
     "the requested pod ports."),
    # 3 CPUs exceed a 2-CPU node's whole allocatable: unresolvable, so not tried
    ([make_node("small", cpu="2"), make_node("big", cpu="4")],
     [make_pod("low", cpu="2", priority=1, node_name="small"),
      make_pod("same", cpu="2", priority=10, node_name="big")],
     make_pod("p", cpu="3", priority=10),
     "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: "
     "0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption "
     "is not helpful for scheduling."),
])
def test_failed_scheduling_message_classifies_nodes_as_upstream(nodes, pods, pod, want):
    """kube-scheduler 1.35's text: the FitError (framework/types.go, FitError.Error) counts each
    node's first failing filter; the PostFilter sentence joins DynamicResources' reason
    (dynamicresources.go, PostFilter) and DefaultPreemption's (framework/preemption/
    preemption.go, Evaluator.Preempt / findCandidates: nodes rejected unresolvably are not
    tried and, like the nodes not tried, are "not helpful"; defaultpreemption/
    default_preemption.go, SelectVictimsOnNode: "No preemption victims found" without lower-
    priority pods, else the status of the filters rerun without them; noderesources/fit.go,
    fitsRequest: a request above the node's allocatable is unresolvable). Fails on the code
    that counted every predicate's reasons per node and omitted the DynamicResources part."""
    decision, result = run(nodes, pods, pod)
    assert result.preemption is None
    assert failed_scheduling_message(decision, result) == want


def _nominated(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod.setdefault("status", {})["nominatedNodeName"] = node
    return pod


def _terminating(pod: dict[str, Any], by_preemption: bool) -> dict[str, Any]:
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if by_preemption:
        pod.setdefault("status", {})["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    return pod


@pytest.mark.parametrize(("by_preemption", "waits"), [(True, True), (False, False)])
def test_a_nominated_pod_waits_only_for_victims_of_preemption(by_preemption: bool,
                                                              waits: bool) -> None:
    """default_preemption.go, PodEligibleToPreemptOthers: the nominated node's lower-priority
    pod terminating *by preemption* (podTerminatingByPreemption) makes the pod wait; a pod
    deleted for another reason does not."""
    nodes = [make_node("n1", cpu="2")]
    pods = [_terminating(make_pod("going", cpu="1", priority=0, node_name="n1"), by_preemption),
            make_pod("low", cpu="1", priority=0, node_name="n1")]
    pod = _nominated(make_pod("p", cpu="2", priority=10), "n1")
    _, result = run(nodes, pods, pod)
    if waits:
        assert result.preemption is None
        assert result.message.endswith("preemption: not eligible due to a terminating pod on "
                                       "the nominated node.")
        assert not result.clear_nomination
    else:
        assert result.preemption is not None and result.preemption.node == "n1"


def test_an_unresolvable_nominated_node_is_preempted_away_from() -> None:
    """A nominated node that now rejects the pod for good (here: cordoned) no longer holds it
    back, even with a victim of its still terminating there."""
    nodes = [make_node("n1", cpu="2", unschedulable=True), make_node("n2", cpu="1")]
    pods = [_terminating(make_pod("going", cpu="1", priority=0, node_name="n1"), True),
            make_pod("low", cpu="1", priority=0, node_name="n2")]
    _, result = run(nodes, pods, _nominated(make_pod("p", cpu="1", priority=10), "n1"))
    assert result.preemption is not None and result.preemption.node == "n2"


def test_no_candidate_clears_the_nomination() -> None:
    """preemption.go, Preempt: no candidate -> NewPostFilterResultWithNominatedNode("")."""
    nodes = [make_node("n1", cpu="1")]
    pods = [make_pod("same", cpu="1", priority=50, node_name="n1")]
    _, result = run(nodes, pods, _nominated(make_pod("p", cpu="1", priority=50), "n1"))
    assert result.preemption is None and result.clear_nomination


def test_the_candidate_search_goes_on_past_pdb_violating_candidates() -> None:
    """preemption.go, DryRunPreemption: the search stops at numCandidates only once one
    candidate violates no PodDisruptionBudget; with minCandidateNodesAbsolute 1 the first node
    tried (PDB-guarded) does not end it, so the free node is found and chosen."""
    from dataclasses import replace

    nodes = [make_node(f"g{i}", cpu="2") for i in range(5)] + [make_node("free", cpu="2")]
    pods = [make_pod(f"guarded{i}", cpu="2", priority=1, labels={"app": "db"},
                     node_name=f"g{i}") for i in range(5)]
    pods.append(make_pod("web", cpu="2", priority=1, labels={"app": "web"}, node_name="free"))
    snap = Snapshot.build(nodes=nodes, pods=pods, pdbs=[_pdb("db", {"app": "db"}, 0)])
    engine = Engine(seed=0)
    engine.policy = replace(engine.policy, min_candidate_nodes_percentage=0,
                            min_candidate_nodes_absolute=1)
    for seed in range(6):  # whichever node the random offset starts at
        engine.random.seed(seed)
        pod = make_pod("p", cpu="2", priority=10)
        result = evaluate_preemption(pod, snap, engine, engine.schedule(pod, snap))
        assert result.preemption is not None and result.preemption.node == "free", seed


def test_without_default_preemption_the_message_ends_with_dynamic_resources_words() -> None:
    """A profile without DefaultPreemption: RunPostFilterPlugins still runs DynamicResources'
    PostFilter (dynamicresources.go), so FitError.Error ends with its reason alone."""
    from dataclasses import replace

    nodes = [make_node("n1", cpu="1")]
    pods = [make_pod("low", cpu="1", priority=0, node_name="n1")]
    snap = Snapshot.build(nodes=nodes, pods=pods)
    engine = Engine(seed=0)
    engine.policy = replace(engine.policy, preemption=False)
    pod = make_pod("p", cpu="1", priority=10)
    decision = engine.schedule(pod, snap)
    result = evaluate_preemption(pod, snap, engine, decision)
    assert result.preemption is None
    assert failed_scheduling_message(decision, result) == \
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate"


@pytest.mark.parametrize(("claims", "classes", "want"), [
    ([], [], 'persistentvolumeclaim "data" not found'),
    ([{"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
       "spec": {"storageClassName": "absent"}}], [],
     "pod has unbound immediate PersistentVolumeClaims"),
])
def test_a_prefilter_rejection_ends_with_dynamic_resources_missing_state(claims, classes, want):
    """kube-scheduler 1.35 stops its PreFilter plugins at an UnschedulableAndUnresolvable one
    (framework/runtime/framework.go, RunPreFilterPlugins), so DynamicResources' PostFilter finds
    no state of its own and fails with the framework's "not found" (dynamicresources.go,
    PostFilter): no preemption, that error as the PostFilter text. Seen from kube-scheduler
    itself in the differential test (a claim naming a StorageClass that does not exist)."""
    nodes = [make_node("n1", cpu="1"), make_node("n2", cpu="1")]
    pods = [make_pod("low", cpu="1", priority=1, node_name="n1")]
    pod = make_pod("p", cpu="1", priority=50, volumes=[
        {"name": "v", "persistentVolumeClaim": {"claimName": "data"}}])
    decision, result = run(nodes, pods, pod, persistent_volume_claims=claims,
                           storage_classes=classes)
    assert result.preemption is None
    assert failed_scheduling_message(decision, result) == (
        f"0/2 nodes are available: {want}. not found")


def test_a_filter_rejection_keeps_the_post_filter_sentences():
    """An unresolvable rejection at Filter (not PreFilter) leaves DynamicResources its state:
    its sentence and DefaultPreemption's, as before."""
    nodes = [make_node("n1", cpu="1")]
    pod = make_pod("p", cpu="1", node_selector={"disk": "ssd"})
    decision, result = run(nodes, [], pod)
    assert failed_scheduling_message(decision, result) == (
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. no new "
        "claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful "
        "for scheduling.")
