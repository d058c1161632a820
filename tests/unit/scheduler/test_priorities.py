"""Every priority, table-driven: scores (0..100, kube-scheduler's MaxNodeScore) for a pod over a
few nodes; the formulas are 1.35's (pkg/scheduler/framework/plugins/...)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import registry
from berthmaster.scheduler.plugins.base import Priority
from berthmaster.scheduler.plugins.node_label import LabelPreference
from berthmaster.scheduler.plugins.service_affinity import ServiceAntiAffinity
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import (
    make_node,
    make_pod,
    match_expression,
    pod_affinity_term,
    taint,
    toleration,
)

ZONE = "topology.kubernetes.io/zone"


def scores(priority: Priority, pod: dict[str, Any], nodes: list[dict[str, Any]],
           existing: list[dict[str, Any]] = (), **objects: Any) -> list[int]:
    snap = Snapshot.build(nodes=nodes, pods=existing, **objects)
    infos = snap.node_list()  # zone by zone in turn: not always the order given
    got = priority.scores(PodView.from_dict(pod), snap, infos)
    by_name = dict(zip((n.name for n in infos),
                       [got] * len(infos) if isinstance(got, int) else got, strict=True))
    return [by_name[n["metadata"]["name"]] for n in nodes]


def R(name: str, **args: Any) -> Priority:
    return registry.PRIORITIES[name](**args)


def test_least_requested():
    nodes = [make_node("a", cpu="4", memory="4Gi"), make_node("b", cpu="4", memory="4Gi")]
    existing = [make_pod("o", cpu="3", memory="3Gi", node_name="a")]
    # noderesources/least_allocated.go: a: cpu (4000-3000-1000)*100/4000 = 0, memory 0;
    # b: cpu 3000*100/4000 = 75, memory 75
    got = scores(R("LeastRequestedPriority"), make_pod("p", cpu="1", memory="1Gi"), nodes,
                 existing)
    assert got == [0, 75]


def test_most_requested_prefers_full_nodes():
    nodes = [make_node("a", cpu="4", memory="4Gi"), make_node("b", cpu="4", memory="4Gi")]
    existing = [make_pod("o", cpu="2", memory="2Gi", node_name="a")]
    got = scores(R("MostRequestedPriority"), make_pod("p", cpu="1", memory="1Gi"), nodes, existing)
    assert got == [75, 25]  # most_allocated.go: requested * 100 / allocatable


def test_most_requested_counts_more_than_the_capacity_as_full():
    """most_allocated.go, mostRequestedScore clamps requested to the capacity: a node whose
    memory the non-zero defaults (200Mi for a container without requests) push over its
    allocatable scores 100 for memory, not 0 (LeastRequested: 0)."""
    nodes = [make_node("a", cpu="4", memory="8Gi")]
    existing = [make_pod("o", cpu="250m", memory="2Gi", node_name="a")]
    existing[0]["spec"]["containers"].append({"name": "bare", "image": "pause"})
    pod = make_pod("p", cpu="1500m", memory="6Gi")
    # cpu (250m + 100m + 1500m) / 4 -> 46; memory 8Gi + 200Mi over 8Gi -> 100
    assert scores(R("MostRequestedPriority"), pod, nodes, existing) == [73]
    assert scores(R("LeastRequestedPriority"), pod, nodes, existing) == [26]


def test_balanced_allocation():
    nodes = [make_node("a", cpu="4", memory="4Gi"), make_node("b", cpu="4", memory="4Gi")]
    existing = [make_pod("o", cpu="2", memory="0", node_name="a")]
    got = scores(R("BalancedResourceAllocation"), make_pod("p", cpu="1", memory="1Gi"), nodes,
                 existing)
    # balanced_allocation.go: a: cpu 3/4, memory 1/4 -> std 0.25 -> (1 - 0.25) * 100 = 75;
    # b: 1/4 and 1/4 -> 100
    assert got == [75, 100]


def test_node_affinity_priority_seed_example():
    # documented preferred node affinity: prefer e2e-az-EastWest In [e2e-az-East, e2e-az-West]
    pod = make_pod("with-node-affinity", preferred_node_terms=[
        (1, [match_expression("e2e-az-EastWest", "In", "e2e-az-East", "e2e-az-West")]),
        (3, [match_expression("ssd", "Exists")])])
    nodes = [make_node("a", labels={"e2e-az-EastWest": "e2e-az-East"}),
             make_node("b", labels={"ssd": "", "e2e-az-EastWest": "e2e-az-West"}),
             make_node("c")]
    # weights 1, 4 and 0, normalised by the highest (helper.DefaultNormalizeScore)
    assert scores(R("NodeAffinityPriority"), pod, nodes) == [25, 100, 0]


def test_taint_toleration_priority_counts_prefer_no_schedule():
    nodes = [make_node("a", taints=[taint("x", "1", "PreferNoSchedule"),
                                    taint("y", "1", "PreferNoSchedule")]),
             make_node("b", taints=[taint("x", "1", "PreferNoSchedule")]), make_node("c")]
    pod = make_pod("p", tolerations=[toleration("y", operator="Exists")])
    assert scores(R("TaintTolerationPriority"), pod, nodes) == [0, 0, 100]
    assert scores(R("TaintTolerationPriority"), make_pod("q"), nodes) == [0, 50, 100]


def test_selector_spread_prefers_nodes_with_fewer_peers():
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"app": "web"}}}
    nodes = [make_node("a"), make_node("b"), make_node("c")]
    existing = [make_pod("w1", labels={"app": "web"}, node_name="a"),
                make_pod("w2", labels={"app": "web"}, node_name="a"),
                make_pod("w3", labels={"app": "web"}, node_name="b")]
    pod = make_pod("p", labels={"app": "web"})
    assert scores(R("SelectorSpreadPriority"), pod, nodes, existing, services=[svc]) == [0, 50, 100]
    assert scores(R("ServiceSpreadingPriority"), make_pod("q"), nodes, existing,
                  services=[svc]) == [100, 100, 100]


def test_selector_spread_weighs_zones():
    rs = {"kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    nodes = [make_node("a", labels={ZONE: "z1"}), make_node("b", labels={ZONE: "z1"}),
             make_node("c", labels={ZONE: "z2"})]
    existing = [make_pod("w1", labels={"app": "web"}, node_name="a")]
    got = scores(R("SelectorSpreadPriority"), make_pod("p", labels={"app": "web"}), nodes,
                 existing, replica_sets=[rs])
    # a: node 0, zone 0 -> 0; b: node 100, zone 0 -> 33; c: 100 and 100 -> 100
    assert got == [0, 33, 100]


def test_inter_pod_affinity_priority():
    nodes = [make_node("a", labels={ZONE: "z1"}), make_node("b", labels={ZONE: "z1"}),
             make_node("c", labels={ZONE: "z2"})]
    existing = [make_pod("s1", labels={"security": "S1"}, node_name="a"),
                make_pod("s2", labels={"security": "S2"}, node_name="c")]
    pod = make_pod("p", preferred_pod_affinity=[(100, pod_affinity_term({"security": "S1"},
                                                                        ZONE))],
                   preferred_pod_anti_affinity=[(100, pod_affinity_term({"security": "S2"}))])
    # raw 100, 100 and -100, scaled between the lowest and the highest (scoring.go)
    assert scores(R("InterPodAffinityPriority"), pod, nodes, existing) == [100, 100, 0]


def test_inter_pod_affinity_priority_symmetry():
    # an existing pod preferring pods like ours attracts us to its node
    nodes = [make_node("a"), make_node("b")]
    existing = [make_pod("o", node_name="b", preferred_pod_affinity=[
        (50, pod_affinity_term({"app": "web"}))])]
    got = scores(R("InterPodAffinityPriority"), make_pod("p", labels={"app": "web"}), nodes,
                 existing)
    assert got == [0, 100]


def test_node_prefer_avoid_pods():
    annotation = json.dumps({"preferAvoidPods": [{"podSignature": {"podController": {
        "kind": "ReplicationController", "name": "rc", "uid": "rc-uid", "controller": True}}}]})
    nodes = [make_node("a", annotations={"scheduler.alpha.kubernetes.io/preferAvoidPods":
                                         annotation}), make_node("b")]
    rc_pod = make_pod("p", owner=("ReplicationController", "rc", "rc-uid"))
    job_pod = make_pod("q", owner=("Job", "j", "rc-uid"))
    assert scores(R("NodePreferAvoidPodsPriority"), rc_pod, nodes) == [0, 100]
    assert scores(R("NodePreferAvoidPodsPriority"), job_pod, nodes) == [100, 100]


def test_image_locality():
    big = 500 * 1024 * 1024
    nodes = [make_node("a", images={"registry.example/app:1": big}), make_node("b")]
    got = scores(R("ImageLocalityPriority"), make_pod("p", image="registry.example/app:1"), nodes)
    assert got[0] > got[1] == 0


def test_equal_priority():
    assert scores(R("EqualPriority"), make_pod(), [make_node("a"), make_node("b")]) == [1, 1]


def test_topology_spread_priority():
    nodes = [make_node("a", labels={ZONE: "z1"}), make_node("b", labels={ZONE: "z2"}),
             make_node("c")]
    existing = [make_pod("w", labels={"app": "web"}, node_name="a")]
    pod = make_pod("p", labels={"app": "web"}, spread=[{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}}}])
    got = scores(R("PodTopologySpread"), pod, nodes, existing)
    # c lacks the key: ignored, 0; a: round(1 * log(2 + 2)) = 1, b: 0; normalised
    # 100 * (max + min - s) / max (podtopologyspread/scoring.go)
    assert got == [0, 100, 0]


@pytest.mark.parametrize(("presence", "want"), [(True, [100, 0]), (False, [0, 100])])
def test_label_preference(presence, want):
    nodes = [make_node("a", labels={"zone": "z1"}), make_node("b")]
    assert scores(LabelPreference(label="zone", presence=presence), make_pod(), nodes) == want


def test_service_anti_affinity_spreads_over_label_values():
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"app": "web"}}}
    nodes = [make_node("a", labels={"rack": "r1"}), make_node("b", labels={"rack": "r1"}),
             make_node("c", labels={"rack": "r2"}), make_node("d")]
    existing = [make_pod("w1", labels={"app": "web"}, node_name="a"),
                make_pod("w2", labels={"app": "web"}, node_name="a"),
                make_pod("w3", labels={"app": "web"}, node_name="c")]
    got = scores(ServiceAntiAffinity(label="rack"), make_pod("p", labels={"app": "web"}), nodes,
                 existing, services=[svc])
    # 3 service pods: r1 holds 2 -> 100*(3-2)/3 = 33; r2 holds 1 -> 66; unlabelled -> 0
    assert got == [33, 33, 66, 0]


@pytest.mark.parametrize(("weight", "want_node", "want_scores"), [
    # raw a = the weight, b = 5, scaled between the lowest and the highest
    (None, "b", {"a": 0, "b": 100}),  # default 1: the own preferred term (weight 5) wins
    (1, "b", {"a": 0, "b": 100}),
    (10, "a", {"a": 100, "b": 0}),    # the existing pod's required term now outweighs it
    (0, "b", {"a": 0, "b": 100}),     # 0 is "not set": the default 1 (createFromPolicy)
])
def test_hard_pod_affinity_symmetric_weight_is_honoured(weight, want_node, want_scores):
    """An existing pod's required affinity term that matches the incoming pod scores its
    domain with the Policy's hardPodAffinitySymmetricWeight (v1.22
    pkg/scheduler/framework/plugins/interpodaffinity/scoring.go, processExistingPod, with the
    InterPodAffinityArgs.HardPodAffinityWeight that v1.22 pkg/scheduler/factory.go,
    createFromPolicy, sets from the Policy when it is not 0). Fails on the code that validated
    the field and then scored with a hard-coded 1."""
    doc: dict[str, Any] = {"kind": "Policy", "apiVersion": "v1",
                           "priorities": [{"name": "InterPodAffinityPriority", "weight": 1}]}
    if weight is not None:
        doc["hardPodAffinitySymmetricWeight"] = weight
    policy = load_policy(json.dumps(doc))
    nodes = [make_node("a"), make_node("b")]
    pods = [make_pod("db", labels={"app": "db"}, node_name="a",
                     pod_affinity=[pod_affinity_term({"app": "web"})]),
            make_pod("cache", labels={"app": "cache"}, node_name="b")]
    web = make_pod("web", labels={"app": "web"},
                   preferred_pod_affinity=[(5, pod_affinity_term({"app": "cache"}))])
    decision = Engine(policy, seed=0).schedule(web, Snapshot.build(nodes=nodes, pods=pods),
                                               explain=True)
    assert decision.node == want_node
    assert {n: s["InterPodAffinityPriority"] for n, s in decision.priority_scores.items()} \
        == want_scores


def test_taint_toleration_without_prefer_no_schedule_taints_scores_the_most():
    """taint_toleration.go, NormalizeScore -> DefaultNormalizeScore(MaxNodeScore, reverse):
    every node at 0 untolerated taints scores 100 (found by the differential test)."""
    assert scores(R("TaintTolerationPriority"), make_pod("p"), [make_node("a"), make_node("b")]) \
        == [100, 100]
