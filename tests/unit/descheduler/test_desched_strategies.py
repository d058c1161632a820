"""Each strategy's decision over small clusters: who goes, who stays (a table per strategy)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.evictor import EvictionBook
from berthmaster.scheduler.descheduler.protection import EvictorSettings
from berthmaster.scheduler.descheduler.strategies import (
    duplicates,
    failed_pods,
    high_node_utilization,
    inter_pod_anti_affinity,
    low_node_utilization,
    node_affinity,
    node_taints,
    pod_lifetime,
    too_many_restarts,
    topology_spread,
)
from tests.unit.descheduler.builders import make_node, make_pod, plan


def params(module: Any, **args: Any) -> Any:
    problems = Problems()
    parsed = module.parse(args, module.NAME, problems)
    assert not problems, problems.lines()
    return parsed


# ----------------------------------------------------------------------- RemoveDuplicates

def test_duplicates_keep_an_even_share_per_node() -> None:
    nodes = [make_node("n1"), make_node("n2"), make_node("n3")]
    pods = [make_pod(f"a{i}", "n1", owner="rs-a") for i in range(4)] + [
        make_pod("b0", "n1", owner="rs-b"), make_pod("b1", "n2", owner="rs-b"),
        make_pod("c0", "n2", owner="rs-c", image="redis"), make_pod("c1", "n2", owner="rs-c"),
    ]
    evicted, _ = plan(duplicates, params(duplicates), nodes, pods)
    # rs-a: 4 replicas over 3 feasible nodes -> ceil(4/3)=2 per node: 2 of the 4 go.
    # rs-b is spread already; rs-c's two pods differ in image, so they are not duplicates.
    assert sorted(evicted) == ["a1", "a2"]


def test_duplicates_need_two_feasible_nodes_and_respect_excluded_kinds() -> None:
    nodes = [make_node("n1"), make_node("n2")]
    pods = [make_pod(f"a{i}", "n1") for i in range(3)]
    evicted, tally = plan(duplicates, params(duplicates), nodes, pods,
                          node_fit=lambda pod, node: node == "n1")
    assert evicted == [] and tally.skipped["less than two feasible nodes for duplicates to land"]
    jobs = [make_pod(f"j{i}", "n1", owner="job", owner_kind="Job") for i in range(3)]
    evicted, _ = plan(duplicates, params(duplicates, excludeOwnerKinds=["Job"]), nodes, jobs)
    assert evicted == []


# ----------------------------------------------------------------------- LowNodeUtilization

def low_args(**extra: Any) -> Any:
    return params(low_node_utilization, thresholds={"cpu": 20, "pods": 20},
                  targetThresholds={"cpu": 50, "pods": 50}, **extra)


def test_low_node_utilization_moves_pods_from_over_to_under_utilized_nodes() -> None:
    nodes = [make_node("hot", cpu="10", pods="10"), make_node("cold", cpu="10", pods="10"),
             make_node("fine", cpu="10", pods="10")]
    hot = [make_pod(f"h{i}", "hot", cpu="1", owner=f"o{i}") for i in range(8)]
    hot[0]["spec"]["priority"] = 100  # highest priority: goes last
    fine = [make_pod(f"f{i}", "fine", cpu="1", owner=f"p{i}") for i in range(3)]
    evicted, _ = plan(low_node_utilization, low_args(), nodes, hot + fine)
    # hot is at 80%; evictions stop once it is back at 50% (target): 3 pods, priority one stays.
    assert len(evicted) == 3 and "h0" not in evicted
    assert all(name.startswith("h") for name in evicted)


@pytest.mark.parametrize(("number_of_nodes", "expect_evictions"), [(0, True), (1, False)])
def test_low_node_utilization_number_of_nodes(number_of_nodes: int, expect_evictions: bool) -> None:
    nodes = [make_node("hot", cpu="10", pods="10"), make_node("cold", cpu="10", pods="10")]
    hot = [make_pod(f"h{i}", "hot", cpu="1", owner=f"o{i}") for i in range(8)]
    evicted, tally = plan(low_node_utilization, low_args(numberOfNodes=number_of_nodes), nodes,
                          hot)
    assert bool(evicted) == expect_evictions
    if not expect_evictions:
        assert "numberOfNodes" in tally.note


def test_low_node_utilization_ignores_unschedulable_under_utilized_nodes() -> None:
    nodes = [make_node("hot", cpu="10", pods="10"),
             make_node("cold", cpu="10", pods="10", unschedulable=True)]
    hot = [make_pod(f"h{i}", "hot", cpu="1", owner=f"o{i}") for i in range(8)]
    evicted, tally = plan(low_node_utilization, low_args(), nodes, hot)
    assert evicted == [] and tally.note == "no node is underutilized, nothing to do here"


# ----------------------------------------------------------------------- HighNodeUtilization

def test_high_node_utilization_empties_under_utilized_nodes() -> None:
    nodes = [make_node("busy", cpu="10"), make_node("idle", cpu="10")]
    pods = [make_pod(f"b{i}", "busy", cpu="1", owner=f"o{i}") for i in range(6)] + [
        make_pod("i0", "idle", cpu="500m", owner="x")]
    evicted, _ = plan(high_node_utilization, params(high_node_utilization,
                                                    thresholds={"cpu": 20}), nodes, pods)
    assert evicted == ["i0"]


# ----------------------------------------------------------------------- node taints

@pytest.mark.parametrize(("args", "tolerations", "taint_effect", "evicted"), [
    ({}, [], "NoSchedule", True),
    ({}, [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
     "NoSchedule", False),
    ({}, [{"operator": "Exists"}], "NoSchedule", False),
    ({}, [], "PreferNoSchedule", False),
    ({"includePreferNoSchedule": True}, [], "PreferNoSchedule", True),
    ({"excludedTaints": ["dedicated"]}, [], "NoSchedule", False),
    ({"excludedTaints": ["dedicated=cpu"]}, [], "NoSchedule", True),
    ({"includedTaints": ["other"]}, [], "NoSchedule", False),
])
def test_node_taints(args: dict[str, Any], tolerations: list[dict[str, str]], taint_effect: str,
                     evicted: bool) -> None:
    nodes = [make_node("n1", taints=[{"key": "dedicated", "value": "gpu",
                                      "effect": taint_effect}])]
    pods = [make_pod("p", "n1", tolerations=tolerations)]
    got, _ = plan(node_taints, params(node_taints, **args), nodes, pods)
    assert got == (["p"] if evicted else [])


# ----------------------------------------------------------------------- node affinity

def required(zone: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": [zone]}]}]}}}


@pytest.mark.parametrize(("pod_zone", "fits_elsewhere", "evicted"), [
    ("a", True, False),   # still satisfied
    ("b", True, True),    # violated, n2 (zone b) would take it
    ("b", False, False),  # violated but nowhere else to go
])
def test_node_affinity_required(pod_zone: str, fits_elsewhere: bool, evicted: bool) -> None:
    nodes = [make_node("n1", labels={"zone": "a"}), make_node("n2", labels={"zone": "b"})]
    pods = [make_pod("p", "n1", affinity=required(pod_zone))]
    got, _ = plan(node_affinity, params(
        node_affinity, nodeAffinityType=["requiredDuringSchedulingIgnoredDuringExecution"]),
        nodes, pods, node_fit=lambda pod, node: fits_elsewhere)
    assert got == (["p"] if evicted else [])


def test_node_affinity_gates_on_a_required_affinity_then_checks_the_node_selector_too() -> None:
    """Upstream removepodsviolatingnodeaffinity/node_affinity.go Deschedule (required case):
    utils.PodHasNodeAffinity(pod, required) must hold first, then
    nodeutil.PodMatchNodeSelector (nodeSelector and required affinity) must fail. A pod with
    only a nodeSelector ("sel-only") stays; one whose affinity holds but whose nodeSelector
    does not ("both") goes."""
    nodes = [make_node("n1", labels={"disk": "hdd", "zone": "a"}),
             make_node("n2", labels={"disk": "ssd", "zone": "a"})]
    pods = [make_pod("sel-only", "n1", nodeSelector={"disk": "ssd"}),
            make_pod("both", "n1", nodeSelector={"disk": "ssd"}, affinity=required("a")),
            make_pod("fine", "n2", nodeSelector={"disk": "ssd"}, affinity=required("a"))]
    got, _ = plan(node_affinity, params(
        node_affinity, nodeAffinityType=["requiredDuringSchedulingIgnoredDuringExecution"]),
        nodes, pods)
    assert got == ["both"]


# ----------------------------------------------------------------------- anti-affinity

def anti(app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def test_anti_affinity_seed_example_evicts_pod_a() -> None:
    """The seed: podB and podC rule out podA on Node1; podA is evicted so both can stay."""
    nodes = [make_node("node1"), make_node("node2")]
    pods = [make_pod("podA", "node1", labels={"app": "a"}, owner="ra"),
            make_pod("podB", "node1", labels={"app": "b"}, owner="rb", affinity=anti("a")),
            make_pod("podC", "node1", labels={"app": "c"}, owner="rc", affinity=anti("a")),
            make_pod("podD", "node2", labels={"app": "a"}, owner="rd")]
    got, _ = plan(inter_pod_anti_affinity, params(inter_pod_anti_affinity), nodes, pods)
    assert got == ["podA"]


def test_anti_affinity_topology_domains_and_protected_partners() -> None:
    nodes = [make_node("n1", labels={"zone": "z1"}), make_node("n2", labels={"zone": "z1"}),
             make_node("n3", labels={"zone": "z2"})]
    pods = [make_pod("x", "n1", labels={"app": "x"}, owner="rx", affinity=anti("y", "zone"),
                     priority=10),  # y sorts first, but y is protected
            make_pod("y", "n2", labels={"app": "y"}, owner=None),  # bare pod: protected
            make_pod("z", "n3", labels={"app": "y"}, owner="rz")]
    got, tally = plan(inter_pod_anti_affinity, params(inter_pod_anti_affinity), nodes, pods)
    assert got == ["x"]  # same zone as y; y cannot go, so x does; z is in another zone
    assert tally.skipped["pod does not have any ownerRefs"] == 1


# ----------------------------------------------------------------------- topology spread

def spread(max_skew: int = 1, when: str = "DoNotSchedule") -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": "zone", "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": "web"}}}]


@pytest.mark.parametrize(("counts", "max_skew", "when", "args", "evictions"), [
    ((4, 0), 1, "DoNotSchedule", {}, 2),
    ((3, 1), 1, "DoNotSchedule", {}, 1),
    ((2, 1), 1, "DoNotSchedule", {}, 0),
    ((4, 0), 3, "DoNotSchedule", {}, 1),
    ((3, 0), 3, "DoNotSchedule", {}, 0),
    ((4, 0), 1, "ScheduleAnyway", {}, 0),
    ((4, 0), 1, "ScheduleAnyway", {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}, 2),
])
def test_topology_spread(counts: tuple[int, int], max_skew: int, when: str,
                         args: dict[str, Any], evictions: int) -> None:
    nodes = [make_node("a1", labels={"zone": "a"}), make_node("b1", labels={"zone": "b"})]
    pods = [make_pod(f"{zone}{i}", f"{zone}1", labels={"app": "web"},
                     topologySpreadConstraints=spread(max_skew, when))
            for zone, count in zip("ab", counts, strict=True) for i in range(count)]
    got, _ = plan(topology_spread, params(topology_spread, **args), nodes, pods)
    assert len(got) == evictions and all(name.startswith("a") for name in got)


def test_topology_spread_domains_honour_node_affinity_and_taints_policies() -> None:
    """Zone c is only reachable through a node the pods' nodeSelector excludes (and zone d
    through a tainted node): with the default policies neither is a domain, so 2/2 over a/b is
    balanced; with nodeAffinityPolicy: Ignore zone c counts and is empty; nodeTaintsPolicy:
    Honor keeps the tainted zone d out, Ignore (the default) lets it in."""
    nodes = [make_node("a1", labels={"zone": "a", "pool": "web"}),
             make_node("b1", labels={"zone": "b", "pool": "web"}),
             make_node("c1", labels={"zone": "c", "pool": "db"})]

    def pods(**policy: str) -> list[dict[str, Any]]:
        constraint = {**spread()[0], **policy}
        return [make_pod(f"{zone}{i}", f"{zone}1", labels={"app": "web"},
                         nodeSelector={"pool": "web"}, topologySpreadConstraints=[constraint])
                for zone in "ab" for i in range(2)]

    got, _ = plan(topology_spread, params(topology_spread, topologyBalanceNodeFit=False),
                  nodes, pods())
    assert got == []
    got, _ = plan(topology_spread, params(topology_spread, topologyBalanceNodeFit=False),
                  nodes, pods(nodeAffinityPolicy="Ignore"))
    assert len(got) == 1  # 2/2/0 over a, b, c: one pod moves towards c

    tainted = [make_node("a1", labels={"zone": "a"}), make_node("b1", labels={"zone": "b"}),
               make_node("d1", labels={"zone": "d"},
                         taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])]
    plain = [make_pod(f"{zone}{i}", f"{zone}1", labels={"app": "web"},
                      topologySpreadConstraints=[{**spread()[0], "nodeTaintsPolicy": policy}])
             for policy, zone in (("Honor", "a"), ("Honor", "b")) for i in range(2)]
    got, _ = plan(topology_spread, params(topology_spread, topologyBalanceNodeFit=False),
                  tainted, plain)
    assert got == []
    ignored = [make_pod(f"{zone}{i}", f"{zone}1", labels={"app": "web"},
                        topologySpreadConstraints=spread()) for zone in "ab" for i in range(2)]
    got, _ = plan(topology_spread, params(topology_spread, topologyBalanceNodeFit=False),
                  tainted, ignored)
    assert len(got) == 1


# ----------------------------------------------------------------------- restarts, lifetime, failed

def restarted(name: str, count: int, waiting: str | None = None) -> dict[str, Any]:
    pod = make_pod(name, "n1")
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    pod["status"]["containerStatuses"] = [{"name": "c", "restartCount": count, "state": state}]
    return pod


@pytest.mark.parametrize(("args", "pods", "expected"), [
    ({"podRestartThreshold": 3}, [restarted("a", 2), restarted("b", 3)], ["b"]),
    ({"podRestartThreshold": 3, "states": ["CrashLoopBackOff"]},
     [restarted("a", 5), restarted("b", 5, "CrashLoopBackOff")], ["b"]),
])
def test_too_many_restarts(args: dict[str, Any], pods: list[dict[str, Any]],
                           expected: list[str]) -> None:
    got, _ = plan(too_many_restarts, params(too_many_restarts, **args), [make_node("n1")], pods)
    assert got == expected


def test_pod_lifetime_evicts_oldest_first_within_states() -> None:
    pods = [make_pod("young", "n1", age=timedelta(minutes=5)),
            make_pod("old", "n1", age=timedelta(hours=3)),
            make_pod("older", "n1", age=timedelta(hours=5)),
            make_pod("pending", "n1", age=timedelta(hours=9), phase="Pending")]
    got, _ = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=3600,
                                       states=["Running"]), [make_node("n1")], pods)
    assert got == ["older", "old"]


def failed(name: str, reason: str, exit_code: int = 1, owner_kind: str = "ReplicaSet"
           ) -> dict[str, Any]:
    pod = make_pod(name, "n1", phase="Failed", owner_kind=owner_kind)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {
        "reason": reason, "exitCode": exit_code}}}]
    return pod


@pytest.mark.parametrize(("args", "expected"), [
    ({}, ["oom", "err", "job"]),
    ({"reasons": ["OOMKilled"]}, ["oom"]),
    ({"exitCodes": [2]}, ["err"]),
    ({"excludeOwnerKinds": ["Job"]}, ["oom", "err"]),
])
def test_failed_pods(args: dict[str, Any], expected: list[str]) -> None:
    pods = [failed("oom", "OOMKilled", 137), failed("err", "Error", 2),
            failed("job", "Error", 1, owner_kind="Job"), make_pod("ok", "n1")]
    got, _ = plan(failed_pods, params(failed_pods, **args), [make_node("n1")], pods)
    assert got == expected


# ----------------------------------------------------------------------- limits inside strategies

def test_per_node_limit_stops_a_strategy_and_is_reported() -> None:
    pods = [make_pod(f"p{i}", "n1", age=timedelta(hours=2)) for i in range(5)]
    got, tally = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60),
                      [make_node("n1")], pods, book=EvictionBook(per_node=2))
    assert len(got) == 2
    assert tally.skipped["maximum number of pods per node reached (maxNoOfPodsToEvictPerNode)"] == 3


def test_protected_pods_are_never_chosen() -> None:
    pods = [make_pod("critical", "n1", age=timedelta(hours=2), priority=2_000_000_000),
            make_pod("local", "n1", age=timedelta(hours=2), volumes=[{"name": "v",
                                                                      "emptyDir": {}}]),
            make_pod("ds", "n1", age=timedelta(hours=2), owner_kind="DaemonSet"),
            make_pod("plain", "n1", age=timedelta(hours=2))]
    got, tally = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60),
                      [make_node("n1")], pods, settings=EvictorSettings())
    assert got == ["plain"] and tally.skipped_total == 3


def test_min_replicas_protects_small_owners() -> None:
    pods = [make_pod("solo", "n1", owner="one", age=timedelta(hours=2))] + [
        make_pod(f"many{i}", "n1", owner="three", age=timedelta(hours=2)) for i in range(3)]
    got, tally = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60),
                      [make_node("n1")], pods, settings=EvictorSettings(min_replicas=2))
    assert sorted(got) == ["many0", "many1", "many2"]
    assert tally.skipped["owner has fewer replicas than minReplicas"] == 1
