"""The engine's plugin contract, typed: declared narrowing, the snapshot's what-if scope, and a
full (unsampled) decision asked for by argument rather than by rewriting engine settings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import NarrowedCheck, narrowing
from berthmaster.scheduler.plugins.general import GeneralPredicates
from berthmaster.scheduler.plugins.node_affinity import NodeAffinity
from berthmaster.scheduler.plugins.pod_topology_spread import PodTopologySpread
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from berthmaster.tooling.devcluster.schedulers import comparison_policy
from tests.support.builders import make_node, make_pod

NODES = [make_node("a", labels={"pool": "x", "zone": "z1"}),
         make_node("b", labels={"pool": "y", "zone": "z1"}),
         make_node("c", labels={"pool": "x", "zone": "z2"})]
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "web"}}}]


@pytest.mark.parametrize(("predicate", "pod", "placed", "allowed"), [
    (NodeAffinity(), make_pod("p", node_selector={"pool": "x"}), [], {"a", "c"}),
    # GeneralPredicates bundles NodeAffinity: the bundle declares its part's narrowing
    (GeneralPredicates(), make_pod("p", cpu="1", node_selector={"pool": "x"}), [], {"a", "c"}),
    (GeneralPredicates(), make_pod("p", cpu="1"), [], None),
    # zone z1 holds two matching pods, z2 none: only z2's node is at or under the limit
    (PodTopologySpread(), make_pod("p", labels={"app": "web"}, spread=SPREAD),
     [make_pod("o1", labels={"app": "web"}, node_name="a"),
      make_pod("o2", labels={"app": "web"}, node_name="b")], {"c"}),
])
def test_checks_declare_the_nodes_they_can_pass(predicate: Any, pod: dict[str, Any],
                                                placed: list[dict[str, Any]],
                                                allowed: set[str] | None) -> None:
    snapshot = Snapshot.build(nodes=NODES, pods=placed)
    check = predicate.prefilter(PodView.from_dict(pod), snapshot)
    assert callable(check)
    assert narrowing(check) == allowed
    assert isinstance(check, NarrowedCheck) == (allowed is not None)
    # the declaration is true: every node outside it is rejected by the check itself
    for info in snapshot.node_list():
        if allowed is not None and info.name not in allowed:
            assert check(info) is not None


def test_what_if_puts_pods_back_and_keeps_assumptions() -> None:
    snapshot = Snapshot.build(nodes=NODES)
    bound = make_pod("bound", cpu="1", node_name="a")
    assumed = make_pod("assumed", cpu="2")
    snapshot.upsert_pod(bound)
    snapshot.upsert_pod(assumed)
    snapshot.assume(assumed, "a")
    info = snapshot.node("a")
    assert info is not None and info.req_cpu == 3000
    views = snapshot.pods_on("a")
    with snapshot.what_if() as scenario:
        for view in views:
            scenario.remove(view)
        assert info.req_cpu == 0 and snapshot.pods_on("a") == []
        scenario.put_back(views[0])
        assert len(snapshot.pods_on("a")) == 1
    assert info.req_cpu == 3000 and len(snapshot.pods_on("a")) == 2
    # the assumption survived the what-if: forgetting it still works
    assert snapshot.is_assumed(assumed["metadata"]["uid"])
    snapshot.forget(assumed)
    assert info.req_cpu == 1000


def test_unsampled_decision_leaves_the_engine_setting_alone() -> None:
    nodes = [make_node(f"n{i:03d}") for i in range(300)]
    snapshot = Snapshot.build(nodes=nodes)
    engine = Engine(percentage_of_nodes_to_score=10, seed=1)
    assert engine.schedule(make_pod("p"), snapshot).feasible == 100  # sampled: the minimum
    full = engine.schedule(make_pod("p"), snapshot, sample=False)
    assert full.feasible == 300 and engine.percentage_of_nodes_to_score == 10


@pytest.mark.parametrize(("tolerations", "allowed"), [
    ([], {"clean"}),
    ([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
     {"clean", "dedicated"}),
    # every taint tolerated: the predicate cannot reject a node, so it hands back no check
    ([{"operator": "Exists"}], None),
])
def test_taints_declare_the_tolerated_nodes_exactly(tolerations: list[dict[str, Any]],
                                                    allowed: set[str] | None) -> None:
    from berthmaster.scheduler.plugins.taint_toleration import TaintToleration
    from tests.support.builders import taint

    snapshot = Snapshot.build(nodes=[
        make_node("clean"), make_node("dedicated", taints=[taint("dedicated", "x")]),
        make_node("gone", taints=[taint("gone", "", "NoExecute")])])
    check = TaintToleration().prefilter(
        PodView.from_dict(make_pod("p", tolerations=tolerations)), snapshot)
    if allowed is None:
        assert check is None
        return
    assert isinstance(check, NarrowedCheck) and check.exact and check.allowed == allowed
    # exact: the check passes every declared node and rejects every other one
    for info in snapshot.node_list():
        assert (check(info) is None) == (info.name in allowed)


def test_per_pod_narrowing_does_not_grow_the_node_cache() -> None:
    """Topology spread declares a new node set for every pod; the engine's positions cache
    (keyed by set) used to keep one entry per pod until a node changed."""
    nodes = [make_node(f"n{i:02d}", labels={"zone": f"z{i % 4}"}) for i in range(40)]
    snapshot = Snapshot.build(nodes=nodes)
    engine = Engine(load_policy(json.dumps(comparison_policy())), seed=3)
    for k in range(300):
        pod = make_pod(f"p{k}", cpu="10m", labels={"app": "web"}, spread=SPREAD)
        decision = engine.schedule(pod, snapshot)
        assert decision.node is not None
        snapshot.assume(pod, decision.node)
    assert len(snapshot.node_cache) < 100
