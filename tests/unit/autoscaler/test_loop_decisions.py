"""Table tests of the autoscaler loop's own pure decisions (operator/autoscaler/loop_decisions.py):
one row per case, input -> expected decision.

Upstream: cluster-autoscaler/core/static_autoscaler.go ``RunOnce`` (the step order, the
unsafe-cluster stop, a loop that scaled up not scaling down), clusterstate/clusterstate.go
(``IsClusterHealthy``, ``updateScaleRequests``), utils/backoff/exponential_backoff.go,
core/scaleup/orchestrator/orchestrator.go ``ScaleUpToNodeGroupMinSize``.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.autoscaler.clusterstate import INITIAL_BACKOFF, UNHEALTHY
from berthmaster.operator.autoscaler.config import (
    AutoscalerConfig,
    ResourceLimits,
    ScaleDownConfig,
    ScaleUpConfig,
)
from berthmaster.operator.autoscaler.groups import ClusterView, NodeGroup
from berthmaster.operator.autoscaler.limits import Totals
from berthmaster.operator.autoscaler.loop_decisions import (
    Backoffs,
    ProvisionVerdict,
    Safety,
    decide_cooldown,
    decide_provisioning,
    decide_safety,
    loop_figures,
    plan_min_size,
    select_pending,
)
from berthmaster.operator.autoscaler.scaledown import Cooldown, ScaleDownPlan, Unneeded
from berthmaster.operator.autoscaler.scaleup import GroupIncrease, ScaleUpDecision
from berthmaster.operator.autoscaler.state import ProvisionRequest
from tests.unit.autoscaler.builders import make_node, make_pod

JSON = dict[str, Any]
NO_BACKOFF = Backoffs({}, {}, {})
TEMPLATE = make_node("template", cpu="4", memory="8Gi")


def view(*groups: NodeGroup) -> ClusterView:
    return ClusterView(groups, {}, {})


def group(name: str, target: int = 1, nodes: tuple[str, ...] = (), min_size: int = 0,
          max_size: int = 5, **fields: Any) -> NodeGroup:
    return NodeGroup("machines", name, min_size, max_size, target, nodes=nodes,
                     template=TEMPLATE, **fields)


def unready(node: JSON) -> JSON:
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return node


@pytest.mark.parametrize(("ready", "unready_names", "starting", "expected"), [
    (3, [], [], Safety(3, 3, 0, None)),
    (2, ["u1", "u2", "u3"], [], Safety(5, 2, 3, None)),  # 3 unready: OK_TOTAL_UNREADY_COUNT
    (2, ["u1", "u2", "u3", "u4"], [], Safety(6, 2, 4, UNHEALTHY)),  # > 3 and > 45%
    (10, ["u1", "u2", "u3", "u4"], [], Safety(14, 10, 4, None)),  # 4 of 14: under 45%
    # nodes still carrying a startup taint are upcoming, not unready
    (2, ["u1", "u2", "u3", "u4"], ["u1", "u2"], Safety(6, 2, 2, None)),
])
def test_decide_safety(ready: int, unready_names: list[str], starting: list[str],
                       expected: Safety) -> None:
    nodes = [make_node(f"r{i}") for i in range(ready)] + [unready(make_node(n))
                                                          for n in unready_names]
    groups = view(group("w", starting_nodes=tuple(starting))) if starting else view()
    assert decide_safety(nodes, groups) == expected


@pytest.mark.parametrize(("groups", "requests", "backoffs", "clock", "forget", "verdicts"), [
    # no requests: nothing to judge
    ((group("w"),), {}, NO_BACKOFF, 100.0, (), ()),
    # a request of a group that is gone is forgotten
    ((), {"machines/gone": ProvisionRequest(0.0, 2)}, NO_BACKOFF, 100.0, ("machines/gone",), ()),
    # its nodes registered: arrived
    ((group("w", target=2, nodes=("n1", "n2")),), {"machines/w": ProvisionRequest(0.0, 2)},
     NO_BACKOFF, 100.0, (), (ProvisionVerdict("machines/w", "arrived"),)),
    # someone lowered the set below the request: arrived (nothing more will come)
    ((group("w", target=1),), {"machines/w": ProvisionRequest(0.0, 2)}, NO_BACKOFF, 100.0, (),
     (ProvisionVerdict("machines/w", "arrived"),)),
    # still within maxNodeProvisionTime (900s by default)
    ((group("w", target=2, nodes=("n1",)),), {"machines/w": ProvisionRequest(0.0, 2)},
     NO_BACKOFF, 899.0, (), (ProvisionVerdict("machines/w", "waiting"),)),
    # timed out: backed off, its unregistered (not deleting) Machines given back, down to min
    ((group("w", target=3, nodes=("n1",), min_size=1, machines=("m1", "m2", "m3"),
            machines_without_node=("m2", "m3"), deleting_machines=("m3",)),),
     {"machines/w": ProvisionRequest(0.0, 3)}, NO_BACKOFF, 1000.0, (),
     (ProvisionVerdict("machines/w", "timed_out", (INITIAL_BACKOFF, 1000.0 + INITIAL_BACKOFF),
                       ("m2",), 2),)),
    # timed out with no Machine to give back: no resize
    ((group("w", target=2, nodes=("n1",)),), {"machines/w": ProvisionRequest(0.0, 2)},
     NO_BACKOFF, 1000.0, (),
     (ProvisionVerdict("machines/w", "timed_out", (INITIAL_BACKOFF, 1000.0 + INITIAL_BACKOFF)),)),
    # a failure after the previous backoff ended doubles it
    ((group("w", target=2, nodes=("n1",)),), {"machines/w": ProvisionRequest(0.0, 2)},
     Backoffs({"machines/w": 300.0}, {"machines/w": 500.0}, {"machines/w": 200.0}), 1000.0, (),
     (ProvisionVerdict("machines/w", "timed_out", (600.0, 1600.0)),)),
])
def test_decide_provisioning(groups: tuple[NodeGroup, ...], requests: dict[str, ProvisionRequest],
                             backoffs: Backoffs, clock: float, forget: tuple[str, ...],
                             verdicts: tuple[ProvisionVerdict, ...]) -> None:
    decision = decide_provisioning(view(*groups), requests, backoffs, clock, 900.0)
    assert (decision.forget, decision.verdicts) == (forget, verdicts)


def created(pod: JSON, at: str) -> JSON:
    pod["metadata"]["creationTimestamp"] = at
    return pod


def nominated(pod: JSON, node: str) -> JSON:
    pod["status"]["nominatedNodeName"] = node
    return pod


NOW = 1767225600.0  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(("pods", "threshold", "delay", "expected"), [
    ([make_pod("bound", node="n1")], -10, 0.0, ([], [], [])),
    ([make_pod("p", unschedulable=True)], -10, 0.0, (["p"], [], [])),
    # below podPriorityThreshold: not helped
    ([make_pod("low", unschedulable=True, priority=-20)], -10, 0.0, ([], [], [])),
    # highest priority first
    ([make_pod("a", unschedulable=True), make_pod("b", unschedulable=True, priority=5)], -10,
     0.0, (["b", "a"], [], [])),
    # nominated on an existing node: waits for preemption
    ([nominated(make_pod("p", unschedulable=True), "n1")], -10, 0.0, ([], ["p"], [])),
    # nominated on a node that is gone: helped
    ([nominated(make_pod("p", unschedulable=True), "gone")], -10, 0.0, (["p"], [], [])),
    # younger than newPodScaleUpDelay: left to the scheduler
    ([created(make_pod("young", unschedulable=True), "2025-12-31T23:59:55Z"),
      created(make_pod("old", unschedulable=True), "2025-12-31T23:59:00Z")], -10, 10.0,
     (["old"], [], ["young"])),
])
def test_select_pending(pods: list[JSON], threshold: int, delay: float,
                        expected: tuple[list[str], list[str], list[str]]) -> None:
    config = AutoscalerConfig(pod_priority_threshold=threshold,
                              scale_up=ScaleUpConfig(new_pod_scale_up_delay=delay))
    pending = select_pending(pods, config, {}, {"n1"}, NOW, [])
    names = tuple([p["metadata"]["name"] for p in chosen]
                  for chosen in (pending.pods, pending.preempting, pending.young))
    assert names == expected


def test_select_pending_takes_a_gang_whole() -> None:
    """A gang's unbound members come with its unschedulable one (gangs.py)."""
    labels = {"scheduling.x-k8s.io/pod-group": "g"}
    pods = [make_pod("m1", unschedulable=True, labels=labels), make_pod("m2", labels=labels)]
    pod_group = {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2}}
    pending = select_pending(pods, AutoscalerConfig(), {}, set(), NOW, [pod_group])
    assert [p["metadata"]["name"] for p in pending.pods] == ["m1", "m2"]
    assert list(pending.gangs) == ["ns/g"]


@pytest.mark.parametrize(("cooldown", "clock", "scaled_up", "expected"), [
    (Cooldown(None, None, None), 1000.0, False, None),
    (Cooldown(None, None, None), 1000.0, True, "scaled up in this loop"),
    (Cooldown(900.0, None, None), 1000.0, False, "delayAfterAdd 600s has not passed since the "
     "last event"),
    (Cooldown(300.0, None, None), 1000.0, False, None),
    (Cooldown(None, 995.0, None), 1000.0, False, "delayAfterDelete 10s has not passed since "
     "the last event"),
    (Cooldown(None, None, 900.0), 1000.0, False, "delayAfterFailure 180s has not passed since "
     "the last event"),
    (Cooldown(900.0, None, None), 1000.0, True, "scaled up in this loop"),
])
def test_decide_cooldown(cooldown: Cooldown, clock: float, scaled_up: bool,
                         expected: str | None) -> None:
    config = AutoscalerConfig(scale_down=ScaleDownConfig(
        delay_after_add=600.0, delay_after_delete=10.0, delay_after_failure=180.0))
    assert decide_cooldown(config, cooldown, clock, scaled_up) == expected


def increase(name: str, current: int, new: int) -> GroupIncrease:
    return GroupIncrease(f"machines/{name}", current, new, 5)


@pytest.mark.parametrize(("enforce", "groups", "decision", "in_backoff", "limits", "expected"), [
    (False, (group("w", target=0, min_size=2),), ScaleUpDecision(), [], ResourceLimits(), ()),
    (True, (group("w", target=0, min_size=2),), ScaleUpDecision(), [], ResourceLimits(),
     (increase("w", 0, 2),)),
    (True, (group("w", target=2, min_size=2),), ScaleUpDecision(), [], ResourceLimits(), ()),
    # in backoff: skipped
    (True, (group("w", target=0, min_size=2),), ScaleUpDecision(), ["machines/w"],
     ResourceLimits(), ()),
    # grown in this loop: judged next loop, on its new size
    (True, (group("w", target=0, min_size=2),),
     ScaleUpDecision(increases=(increase("w", 0, 1),)), [], ResourceLimits(), ()),
    # this loop's scale-up counts against maxNodesTotal: 3 nodes now, 1 asked, room for 1
    (True, (group("w", target=1, min_size=1), group("v", target=0, min_size=3)),
     ScaleUpDecision(increases=(increase("w", 1, 2),)), [], ResourceLimits(max_nodes_total=5),
     (increase("v", 0, 1),)),
])
def test_plan_min_size(enforce: bool, groups: tuple[NodeGroup, ...], decision: ScaleUpDecision,
                       in_backoff: list[str], limits: ResourceLimits,
                       expected: tuple[GroupIncrease, ...]) -> None:
    config = AutoscalerConfig(enforce_node_group_min_size=enforce, limits=limits)
    assert plan_min_size(view(*groups), config, Totals(nodes=3), decision,
                         in_backoff) == expected


PLAN = ScaleDownPlan(unneeded=(Unneeded("n1", "machines/w", 0.1, ()),),
                     unremovable={"n2": "NotUnderutilized", "n3": "NotUnderutilized",
                                  "n4": "NoPlaceToMovePods"})


@pytest.mark.parametrize(("safety", "unschedulable", "plan", "cooldown", "expected"), [
    (Safety(6, 2, 4, UNHEALTHY), 0, None, None,
     {"ready_nodes": 2, "unready_nodes": 4, "node_groups": 1, "max_nodes": 5,
      "safe_to_autoscale": False, "upcoming_nodes": 0, "unneeded_nodes": 0}),
    (Safety(5, 5, 0, None), 2, PLAN, "delayAfterAdd",
     {"ready_nodes": 5, "unready_nodes": 0, "node_groups": 1, "max_nodes": 5,
      "safe_to_autoscale": True, "upcoming_nodes": 2, "unschedulable_pods": 2,
      "unneeded_nodes": 1, "in_cooldown": True,
      "unremovable": {"NotUnderutilized": 2, "NoPlaceToMovePods": 1}}),
    (Safety(5, 4, 0, None), 0, None, None,
     {"ready_nodes": 4, "unready_nodes": 1, "upcoming_nodes": 2, "unneeded_nodes": 0,
      "in_cooldown": False, "unremovable": {}}),
])
def test_loop_figures(safety: Safety, unschedulable: int, plan: ScaleDownPlan | None,
                      cooldown: str | None, expected: dict[str, Any]) -> None:
    figures = loop_figures(safety, view(group("w", target=3, nodes=("n1",), machines=("m1",))),
                           unschedulable,
                           plan, cooldown)
    assert {key: getattr(figures, key) for key in expected} == expected
