"""Leaving barred nodes out of the walk changes no decision (property-based).

Inter-pod affinity hands the engine the nodes its required anti-affinity bars (an
``ExcludingCheck``: the pod's own terms and existing pods' terms) and, for required affinity,
exactly the nodes that pass (an exact ``NarrowedCheck``); the engine then walks only the
others. Each case schedules a sequence of pods (placing each where it lands) twice, with the
plugin handing back its plain check instead, and compares every decision, explained ones
(every node's reasons) included.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.plugins import inter_pod_affinity
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, pod_affinity_term, taint
from tests.support.layouts import zoned_nodes

POLICY = {"kind": "Policy", "apiVersion": "v1",
          "predicates": [{"name": "PodToleratesNodeTaints"}, {"name": "PodFitsResources"},
                         {"name": "MatchInterPodAffinity"}],
          "priorities": [{"name": "LeastRequestedPriority", "weight": 1},
                         {"name": "InterPodAffinityPriority", "weight": 1}]}
KEYS = ("kubernetes.io/hostname", "zone")

incoming = st.tuples(st.sampled_from(["web", "db"]),  # the pod's app label
                     st.sampled_from([None, *KEYS]),  # its anti-affinity to app=web, on key
                     st.sampled_from([None, *KEYS]),  # its affinity to app=db, on key
                     st.booleans())  # whether it is explained


def cluster(zones: list[int], tainted: list[bool], placed: list[tuple[int, str, bool]]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(f"n{i:02d}", cpu="2", labels={"zone": f"z{zone}"},
                       taints=[taint("dedicated", "x")] if bad else [])
             for i, (zone, bad) in enumerate(zip(zones, tainted, strict=True))]
    pods = [make_pod(f"old{j}", cpu="500m", labels={"app": app},
                     node_name=f"n{index % len(nodes):02d}",
                     pod_anti_affinity=[pod_affinity_term({"app": "web"})] if anti else ())
            for j, (index, app, anti) in enumerate(placed)]
    return nodes, pods


def run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
        new: list[tuple[str, str | None, str | None, bool]]) -> list[tuple[Any, ...]]:
    snapshot = Snapshot.build(nodes=nodes, pods=pods)
    engine = Engine(load_policy(json.dumps(POLICY)), seed=7)
    out = []
    for k, (app, anti, affinity, explain) in enumerate(new):
        pod = make_pod(f"new{k}", cpu="500m", labels={"app": app},
                       pod_anti_affinity=[pod_affinity_term({"app": "web"}, anti)] if anti
                       else (),
                       pod_affinity=[pod_affinity_term({"app": "db"}, affinity)] if affinity
                       else ())
        decision = engine.schedule(pod, snapshot, explain=explain)
        out.append((decision.node, decision.feasible, decision.evaluated, decision.message,
                    decision.reasons if explain or not decision.node else None,
                    engine._next_start))
        if decision.node:
            snapshot.assume(pod, decision.node)
    return out


@settings(max_examples=120, deadline=None)
@given(zoned_nodes(4, 30),
       st.lists(st.tuples(st.integers(0, 29), st.sampled_from(["web", "db"]), st.booleans()),
                max_size=20),
       st.lists(incoming, min_size=1, max_size=12))
def test_walking_around_barred_nodes_decides_as_the_full_walk(
        layout: tuple[list[int], list[bool]], placed: list[tuple[int, str, bool]],
        new: list[tuple[str, str | None, str | None, bool]]) -> None:
    zones, tainted = layout
    nodes, pods = cluster(zones, tainted, placed)
    narrowed = run(nodes, pods, new)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inter_pod_affinity, "NarrowedCheck",
                      lambda check, allowed, exact=False: check)
        patch.setattr(inter_pod_affinity, "ExcludingCheck", lambda check, blocked: check)
        full = run(nodes, pods, new)
    assert narrowed == full
