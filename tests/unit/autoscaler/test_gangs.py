"""Gangs and the autoscaler: a PodGroup grows the cluster whole or not at all, and scale-down
never leaves a running PodGroup below its ``minMember``.

The all-or-nothing scale-up is modelled on cluster-autoscaler's
core/scaleup/orchestrator/orchestrator.go (``ScaleUp(..., allOrNothing)``, the
``atomic-scale-up.kubernetes.io`` ProvisioningRequest class) with its reason from
core/scaleup/orchestrator/rejectedreasons.go (``AllOrNothingReason``); the PodGroup and its
label are scheduler-plugins' (apis/scheduling/v1alpha1/types.go ``PodGroupLabel``). The
scale-down rule is berthmaster's own (cluster-autoscaler has no gang support): see
docs/autoscaler.md.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.gangs import (
    ALL_OR_NOTHING_REASON,
    POD_GROUP_MIN_MEMBER,
    gangs_of,
    short_gangs,
    with_pending_members,
)
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.scaledown import find_unneeded, pods_to_drain
from berthmaster.operator.autoscaler.scaleup import ScaleUpDecision, decide_scale_up, pods_to_help
from berthmaster.operator.autoscaler.simulation import Simulation
from tests.unit.autoscaler.builders import (
    fits,
    make_machine,
    make_machine_set,
    make_node,
    make_pod,
)

JSON = dict[str, Any]
LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group(name: str, min_member: int, namespace: str = "ns") -> JSON:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member}}


def member(name: str, group: str = "g", node: str | None = None, cpu: str = "3",
           unschedulable: bool = True) -> JSON:
    """A gang pod; 3 cores: one per 4-core node."""
    return make_pod(name, cpu=cpu, memory="1Gi", node=node,
                    unschedulable=unschedulable and node is None,
                    labels={"app": name, LABEL: group})


def decide(pods: list[JSON], groups: list[JSON], nodes: list[JSON], max_size: int = 5
           ) -> ScaleUpDecision:
    config = AutoscalerConfig()
    view = build_cluster_view([make_machine_set("workers", 0, max_size=max_size)], [], nodes)
    sim = Simulation.build(fits, nodes, pods)
    upcoming = [(g.template, g.upcoming) for g in view.groups if g.template is not None]
    gangs = gangs_of(pods, groups)
    pending, _ = pods_to_help(pods, config.pod_priority_threshold)
    pending = with_pending_members(pending, pods, gangs)
    before = sorted(sim.node_names())
    decision = decide_scale_up(pending, view, sim, config,
                               cluster_totals(nodes, config.limits, upcoming), (),
                               random.Random(1), None, gangs)
    assert sorted(sim.node_names()) == before, "the simulation must be rolled back"
    return decision


FREE = [make_node("free")]  # 4 cores, empty: room for one gang pod
GANG_OF_3 = [member("g-0"), member("g-1"), member("g-2")]


@pytest.mark.parametrize(("case", "pods", "groups", "max_size", "increase", "triggered"), [
    ("one free node, two more at once", GANG_OF_3, [pod_group("g", 3)], 5, 2,
     ["ns/g-1", "ns/g-2"]),
    ("minMember 2: the free node and one new one start it", GANG_OF_3, [pod_group("g", 2)], 1,
     1, ["ns/g-1"]),
    ("running members count", [member("g-0"), member("g-1"), member("r-0", node="busy")],
     [pod_group("g", 3)], 1, 1, ["ns/g-1"]),
    ("a pod whose label names no PodGroup is a single pod", GANG_OF_3, [], 1, 1, ["ns/g-1"]),
    ("siblings not yet marked unschedulable are counted too",
     [member("g-0"), member("g-1", unschedulable=False), member("g-2", unschedulable=False)],
     [pod_group("g", 3)], 5, 2, ["ns/g-1", "ns/g-2"]),
])
def test_a_gang_gets_one_scale_up_sized_for_it(case: str, pods: list[JSON], groups: list[JSON],
                                               max_size: int, increase: int,
                                               triggered: list[str]) -> None:
    nodes = [*FREE, make_node("busy")]  # busy is full: r-0 or a filler runs there
    filler = [] if any(p["spec"].get("nodeName") for p in pods) else [
        make_pod("filler", cpu="3", node="busy")]
    decision = decide([*pods, *filler], groups, nodes, max_size)
    assert sum(i.new - i.current for i in decision.increases) == increase, case
    assert sorted(decision.triggered) == triggered, case


def test_a_gang_that_cannot_fit_even_at_max_size_scales_nothing_and_says_why() -> None:
    """Max size 1: the free node and one new node hold 2 of the 3 members: no partial
    scale-up (upstream's all-or-nothing), the pods and their PodGroup hear why."""
    decision = decide(GANG_OF_3, [pod_group("g", 3)], FREE, max_size=1)
    assert decision.increases == ()
    expected = f"pod didn't trigger scale-up: 1 {ALL_OR_NOTHING_REASON}"
    assert decision.not_triggered == {"ns/g-1": expected, "ns/g-2": expected}
    assert decision.not_triggered_gangs == {"ns/g": expected}


def test_a_gang_left_out_leaves_room_for_the_pods_that_fit() -> None:
    single = make_pod("single", cpu="3", memory="1Gi", unschedulable=True)
    decision = decide([*GANG_OF_3, single], [pod_group("g", 3)], FREE, max_size=1)
    assert [(i.current, i.new) for i in decision.increases] == [(0, 1)]
    assert list(decision.triggered) == ["ns/single"]
    assert set(decision.not_triggered) == {"ns/g-1", "ns/g-2"}


def test_short_gangs_counts_running_and_placed_members() -> None:
    gangs = gangs_of([member("r", node="n")], [pod_group("g", 3), pod_group("h", 1)])
    assert gangs["ns/g"].running == 1
    assert short_gangs(gangs, [member("a")]) == {"ns/g"}
    assert short_gangs(gangs, [member("a"), member("b")]) == set()
    assert short_gangs(gangs, [member("x", group="h"), member("y", group="none")]) == set()


def plan(min_member: int) -> tuple[set[str], dict[str, str], dict[str, str]]:
    """Three workers of one MachineSet: ``a`` and ``b`` each run one member of gang ``g``,
    ``c`` is empty; ``spare`` (not autoscaled) has room for everything."""
    config = AutoscalerConfig()
    nodes = [make_node("a"), make_node("b"), make_node("c"), make_node("spare", cpu="16")]
    machines = [make_machine(f"m-{n}", "w", n) for n in "abc"]
    pods = [member("g-0", node="a", cpu="500m"), member("g-1", node="b", cpu="500m")]
    view = build_cluster_view([make_machine_set("w", 3)], machines, nodes)
    sim = Simulation.build(fits, nodes, pods)
    by_node: dict[str, list[JSON]] = {}
    for pod in pods:
        by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
    result = find_unneeded(nodes, by_node, view, sim, config, [],
                           cluster_totals(nodes, config.limits),
                           gangs=gangs_of(pods, [pod_group("g", min_member)]))
    return {u.node for u in result.unneeded}, dict(result.unremovable), dict(result.messages)


@pytest.mark.parametrize(("min_member", "unneeded", "kept"), [
    (2, {"c"}, {"a", "b"}),  # running exactly minMember: every member keeps its node
    (1, {"a", "c"}, {"b"}),  # one member above minMember: one node may go, not both
    (0, {"a", "b", "c"}, set()),
])
def test_scale_down_never_leaves_a_gang_below_min_member(min_member: int, unneeded: set[str],
                                                         kept: set[str]) -> None:
    found, unremovable, messages = plan(min_member)
    assert found == unneeded
    assert {n for n, r in unremovable.items() if r == "BlockedByPod"} == kept
    for node in kept:
        assert messages[node].startswith(f"{POD_GROUP_MIN_MEMBER}: pod ns/g-")
        assert f"fewer than its minMember {min_member} running pods (2 running)" in messages[node]


def test_the_drain_judges_the_gang_again() -> None:
    pods = [member("g-0", node="a", cpu="500m"), member("g-1", node="b", cpu="500m")]
    gangs = gangs_of(pods, [pod_group("g", 2)])
    to_move, blocked = pods_to_drain(pods[:1], AutoscalerConfig(), [], gangs=gangs)
    assert to_move == [] and blocked is not None and blocked.reason == POD_GROUP_MIN_MEMBER
    to_move, blocked = pods_to_drain(pods[:1], AutoscalerConfig(), [],
                                     gangs=gangs_of(pods, [pod_group("g", 1)]))
    assert blocked is None and [p["metadata"]["name"] for p in to_move] == ["g-0"]
