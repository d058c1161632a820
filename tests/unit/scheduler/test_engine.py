"""Engine: filter -> score -> select, FailedScheduling messages, sampling, ties."""

from __future__ import annotations

import pytest

from berthmaster.scheduler.engine import Engine, num_feasible_nodes_to_find
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, match_expression, taint, toleration


def test_failed_scheduling_message_three_taint_example():
    nodes = [make_node("node1", taints=[taint("key1", "value1", "NoSchedule"),
                                        taint("key1", "value1", "NoExecute"),
                                        taint("key2", "value2", "NoSchedule")]),
             make_node("node2", cpu="1"), make_node("node3", cpu="1")]
    pod = make_pod("p", cpu="2", tolerations=[toleration("key1", "value1", "NoSchedule", "Equal"),
                                              toleration("key1", "value1", "NoExecute",
                                                         "Equal")])
    decision = Engine(seed=1).schedule(pod, Snapshot.build(nodes=nodes))
    assert decision.node is None
    assert decision.message == ("0/3 nodes are available: 1 node(s) had untolerated taint(s), "
                                "2 Insufficient cpu.")
    assert decision.reasons["node2"] == ["Insufficient cpu"]
    # 2 CPUs exceed the 1-CPU nodes' whole allocatable: no preemption could help there either
    assert decision.unresolvable == {"node1", "node2", "node3"}


def test_message_counts_sorted_as_strings_and_multiple_reasons_per_node():
    nodes = [make_node(f"n{i}", cpu="1", memory="1Gi") for i in range(11)]
    nodes.append(make_node("sel", labels={}))
    pod = make_pod("p", cpu="2", memory="2Gi", node_selector=None)
    decision = Engine().schedule(pod, Snapshot.build(nodes=nodes[:11]))
    assert decision.message == "0/11 nodes are available: 11 Insufficient cpu, " \
                               "11 Insufficient memory."


def test_no_nodes():
    assert Engine().schedule(make_pod(), Snapshot()).message == \
        "no nodes available to schedule pods"


def test_node_affinity_seed_example_picks_the_matching_node():
    nodes = [make_node("node1", labels={"zone": "us"}), make_node("node2", labels={"zone": "emea"})]
    pod = make_pod("pod-s1", required_node_terms=[[match_expression("zone", "In", "us")]])
    assert Engine().schedule(pod, Snapshot.build(nodes=nodes)).node == "node1"


def test_node_affinity_seed_example_no_match():
    snap = Snapshot.build(nodes=[make_node("node1", labels={"zone": "emea"})])
    pod = make_pod("pod-s1", required_node_terms=[[match_expression("zone", "In", "us")]])
    decision = Engine().schedule(pod, snap)
    assert decision.message == \
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."


def test_least_requested_wins():
    nodes = [make_node("busy"), make_node("idle")]
    pods = [make_pod("o", cpu="3", memory="6Gi", node_name="busy")]
    assert Engine(seed=3).schedule(make_pod("p", cpu="100m"), Snapshot.build(
        nodes=nodes, pods=pods)).node == "idle"


def test_ties_broken_by_seeded_random():
    snap = Snapshot.build(nodes=[make_node(f"n{i}") for i in range(8)])
    picks = {Engine(seed=s).schedule(make_pod("p"), snap).node for s in range(20)}
    assert len(picks) > 1
    again = [Engine(seed=7).schedule(make_pod("p"), snap).node for _ in range(3)]
    assert len(set(again)) == 1


def test_explain_reports_verdicts_and_scores():
    nodes = [make_node("a"), make_node("b", taints=[taint("k", "v")])]
    decision = Engine(seed=0).schedule(make_pod("p"), Snapshot.build(nodes=nodes), explain=True)
    assert decision.node == "a"
    # the default profile names its plugins as kube-scheduler 1.35's does
    assert decision.verdicts["b"]["TaintToleration"] == "node(s) had untolerated taint {k: v}"
    assert decision.verdicts["a"]["TaintToleration"] == ""
    assert "NodeResourcesFit" in decision.priority_scores["a"]
    assert decision.scores["a"] > 0


@pytest.mark.parametrize(("nodes", "percentage", "want"), [
    (50, 0, 50), (100, 0, 100), (1000, 0, 420), (5000, 0, 500), (6000, 0, 300),
    (20000, 0, 1000), (5000, 100, 5000), (5000, 30, 1500), (1000, 5, 100),
])
def test_num_feasible_nodes_to_find(nodes, percentage, want):
    assert num_feasible_nodes_to_find(nodes, percentage) == want


def test_sampling_stops_early_and_rotates():
    snap = Snapshot.build(nodes=[make_node(f"n{i:04d}") for i in range(1000)])
    engine = Engine(seed=0)
    first = engine.schedule(make_pod("p"), snap)
    second = engine.schedule(make_pod("q"), snap)
    assert first.evaluated == first.feasible == 420
    assert engine._next_start == 840
    assert second.node != first.node
    full = Engine(percentage_of_nodes_to_score=100).schedule(make_pod("p"), snap)
    assert full.feasible == 1000


def test_fits_and_feasible_nodes_ignore_the_pods_own_node_name():
    nodes = [make_node("a", cpu="1"), make_node("b", cpu="4")]
    running = make_pod("r", cpu="2", node_name="b")
    snap = Snapshot.build(nodes=nodes, pods=[running])
    engine = Engine()
    assert engine.fits(running, "a", snap) is False
    assert engine.feasible_nodes(make_pod("p", cpu="1"), snap) == ["a", "b"]
    assert engine.feasible_nodes(make_pod("p", cpu="1500m"), snap, ["a", "b"]) == ["b"]


def test_policy_replaces_default_predicates():
    # with only PodFitsResources, node selectors no longer matter
    policy = load_policy('{"kind": "Policy", "apiVersion": "v1", '
                         '"predicates": [{"name": "PodFitsResources"}], '
                         '"priorities": [{"name": "EqualPriority", "weight": 1}]}')
    snap = Snapshot.build(nodes=[make_node("t", labels={"disk": "hdd"})])
    pod = make_pod("p", node_selector={"disk": "ssd"})
    assert Engine(policy).schedule(pod, snap).node == "t"
    assert Engine().schedule(pod, snap).node is None


@pytest.mark.parametrize("predicates", [
    '[{"name": "PodFitsResources"}]',
    '[]',
    # the documentation's own example policy lists a handful of predicates and no taint one
    '[{"name": "MatchNodeSelector"}, {"name": "PodFitsHostPorts"}, '
    '{"name": "PodFitsResources"}, {"name": "NoDiskConflict"}, '
    '{"name": "MaxEBSVolumeCount"}, {"name": "MatchInterPodAffinity"}]',
])
def test_taints_are_checked_whatever_the_policy_lists(predicates):
    """PodToleratesNodeTaints is mandatory, as CheckNodeUnschedulable: kube-scheduler ran both
    whatever a Policy listed from 1.14 until the Policy API was removed (v1.22
    pkg/scheduler/framework/plugins/legacy_registry.go: NewLegacyRegistry's
    mandatoryPredicates, joined to the Policy's predicates by AppendPredicateConfigs). Fails on
    the code where only CheckNodeUnschedulable was mandatory: the pod went to the master."""
    policy = load_policy(f'{{"kind": "Policy", "predicates": {predicates}, "priorities": []}}')
    snap = Snapshot.build(nodes=[
        make_node("master", taints=[taint("node-role.kubernetes.io/master", "", "NoSchedule")]),
        make_node("worker", cpu="1", taints=[taint("dedicated", "gpu", "NoExecute")])])
    decision = Engine(policy).schedule(make_pod("p", cpu="100m"), snap)
    assert decision.node is None
    assert decision.message == "0/2 nodes are available: 2 node(s) had untolerated taint(s)."
    tolerant = make_pod("t", tolerations=[toleration("dedicated", "gpu", "NoExecute", "Equal")])
    assert Engine(policy).schedule(tolerant, snap).node == "worker"


def test_cordoned_nodes_always_rejected_even_when_policy_omits_it():
    policy = load_policy('{"kind": "Policy", "predicates": [], "priorities": []}')
    snap = Snapshot.build(nodes=[make_node("c", unschedulable=True)])
    assert Engine(policy).schedule(make_pod("p"), snap).message == \
        "0/1 nodes are available: 1 node(s) were unschedulable."


def test_prefilter_rejection_message():
    snap = Snapshot.build(nodes=[make_node("a"), make_node("b")], persistent_volume_claims=[{
        "metadata": {"name": "data", "namespace": "default"}, "spec": {}}])
    policy = load_policy('{"kind": "Policy", "predicates": [{"name": "CheckVolumeBinding"}], '
                         '"priorities": []}')
    pod = make_pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    decision = Engine(policy).schedule(pod, snap)
    assert decision.message == \
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_always_check_all_predicates_reports_every_reason():
    policy = load_policy('{"kind": "Policy", "alwaysCheckAllPredicates": true, "predicates": ['
                         '{"name": "PodToleratesNodeTaints"}, {"name": "PodFitsResources"}], '
                         '"priorities": []}')
    snap = Snapshot.build(nodes=[make_node("a", cpu="1", taints=[taint("k", "v")])])
    decision = Engine(policy).schedule(make_pod("p", cpu="2"), snap)
    assert decision.reasons["a"] == ["node(s) had untolerated taint(s)", "Insufficient cpu"]


def test_unschedulable_events():
    snap = Snapshot.build(nodes=[make_node("a", cpu="1")])
    engine = Engine()
    decision = engine.schedule(make_pod("p", cpu="2"), snap)
    assert "Pod/Delete" in engine.unschedulable_events(decision)


def test_affinity_narrowing_reports_true_reasons_when_nothing_fits():
    nodes = [make_node("a", labels={"zone": "x"}, taints=[taint("k", "v")]),
             make_node("b", labels={"zone": "y"}, cpu="1"), make_node("c", labels={"zone": "z"})]
    pod = make_pod("p", cpu="2", required_node_terms=[[match_expression("zone", "In", "y")]])
    decision = Engine().schedule(pod, Snapshot.build(nodes=nodes))
    assert decision.message == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node "
        "affinity/selector, 1 node(s) had untolerated taint(s).")


def test_nominated_node_is_tried_first():
    nodes = [make_node("idle"), make_node("busy")]
    pods = [make_pod("o", cpu="3", memory="6Gi", node_name="busy")]
    pod = make_pod("p", cpu="100m")
    pod["status"]["nominatedNodeName"] = "busy"
    snap = Snapshot.build(nodes=nodes, pods=pods)
    assert Engine(seed=1).schedule(pod, snap).node == "busy"
    pod["status"]["nominatedNodeName"] = "gone"
    assert Engine(seed=1).schedule(pod, snap).node == "idle"


def test_narrowed_walk_keeps_upstream_sampling_semantics():
    # 300 nodes, even ones in zone a: the pod needs zone a; 144 feasible nodes are wanted
    nodes = [make_node(f"n{i:03d}", labels={"zone": "a" if i % 2 == 0 else "b"})
             for i in range(300)]
    snap = Snapshot.build(nodes=nodes)
    pod = make_pod("p", required_node_terms=[[match_expression("zone", "In", "a")]],
                   tolerations=[toleration(operator="Exists")], host_ports=[8080])
    engine = Engine(seed=0)
    decision = engine.schedule(pod, snap)
    assert decision.feasible == 144 and decision.evaluated == 287
    assert int(decision.node[1:]) % 2 == 0
    assert engine._next_start == 287
    explained = Engine(seed=0).schedule(pod, snap, explain=True)
    assert explained.evaluated == 287
    assert len(explained.reasons) == 143
    assert all(r == ["node(s) didn't match Pod's node affinity/selector"]
               for r in explained.reasons.values())
    # starting mid-way wraps around
    second = engine.schedule(pod, snap)
    # from n287 (zone b) the 144th zone-a node is n274, 288 nodes later
    assert second.evaluated == 288 and engine._next_start == (287 + 288) % 300
