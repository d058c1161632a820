"""Walking only the nodes topology spread can pass changes no decision (property-based).

PodTopologySpread hands the engine the nodes in domains at or under their limit
(``allowed_nodes``); the engine then visits only those, and skips working out the other nodes'
reasons when something fits. Each case schedules a sequence of spread pods (placing each where
it lands) twice, with and without that narrowing, and compares every decision.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.plugins import pod_topology_spread
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, taint
from tests.support.layouts import zoned_nodes

POLICY = {"kind": "Policy", "apiVersion": "v1",
          "predicates": [{"name": "PodToleratesNodeTaints"}, {"name": "PodFitsResources"},
                         {"name": "PodTopologySpread"}],
          "priorities": [{"name": "LeastRequestedPriority", "weight": 1},
                         {"name": "EvenPodsSpreadPriority", "weight": 1}]}


def cluster(zones: list[int], tainted: list[bool], placed: list[int]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(f"n{i:02d}", labels={"zone": f"z{zone}"},
                       taints=[taint("dedicated", "x")] if bad else [])
             for i, (zone, bad) in enumerate(zip(zones, tainted, strict=True))]
    pods = [make_pod(f"old{j}", cpu="100m", labels={"app": "web"},
                     node_name=f"n{index % len(nodes):02d}")
            for j, index in enumerate(placed)]
    return nodes, pods


def run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], new: int, max_skew: int,
        taints_policy: str) -> list[tuple[Any, ...]]:
    snapshot = Snapshot.build(nodes=nodes, pods=pods)
    engine = Engine(load_policy(json.dumps(POLICY)), seed=7)
    out = []
    for k in range(new):
        pod = make_pod(f"new{k}", cpu="100m", labels={"app": "web"}, spread=[{
            "maxSkew": max_skew, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "nodeTaintsPolicy": taints_policy,
            "labelSelector": {"matchLabels": {"app": "web"}}}])
        decision = engine.schedule(pod, snapshot)
        out.append((decision.node, decision.feasible, decision.evaluated, decision.message,
                    engine._next_start))
        if decision.node:
            snapshot.assume(pod, decision.node)
    return out


@settings(max_examples=120, deadline=None)
@given(zoned_nodes(5, 40),
       st.lists(st.integers(0, 39), max_size=30), st.integers(1, 12), st.integers(1, 2),
       st.sampled_from(["Ignore", "Honor"]))
def test_narrowed_walk_decides_as_the_full_walk(layout: tuple[list[int], list[bool]],
                                                placed: list[int], new: int, max_skew: int,
                                                taints_policy: str) -> None:
    zones, tainted = layout
    nodes, pods = cluster(zones, tainted, placed)
    narrowed = run(nodes, pods, new, max_skew, taints_policy)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pod_topology_spread, "allowed_nodes", lambda plan, snapshot: (None, False))
        full = run(nodes, pods, new, max_skew, taints_policy)
    assert narrowed == full


def test_the_node_sets_kept_per_key_are_bounded() -> None:
    """A workload that fills its domains in turn meets ever new sets of passing domains; the
    node cache keeps the last UNIONS of them, each still the right set."""
    nodes = [make_node(f"n{i:02d}", labels={"zone": f"z{i % 10}"}) for i in range(30)]
    snapshot = Snapshot.build(nodes=nodes)
    for mask in range(1, 2 ** 10 - 1):  # every proper subset of the ten zones passes once
        counts = {f"z{z}": 0 if mask >> z & 1 else 1 for z in range(10)}
        allowed, exact = pod_topology_spread.allowed_nodes([("zone", counts, 0)], snapshot)
        assert exact and allowed == {f"n{i:02d}" for i in range(30) if mask >> (i % 10) & 1}
        kept = snapshot.node_cache[("spread-allowed", "zone")]
        assert len(kept) <= pod_topology_spread.UNIONS
