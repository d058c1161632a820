"""Scale-down: every blocker keeps its node; an idle node goes after unneededTime."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import (
    AutoscalerConfig,
    ResourceLimits,
    ResourceRange,
    ScaleDownConfig,
)
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.scaledown import (
    Cooldown,
    ScaleDownPlan,
    Unneeded,
    cooldown_reason,
    eviction_grace_period,
    find_unneeded,
    select_removals,
    track_unneeded,
    utilization,
)
from berthmaster.operator.autoscaler.simulation import Simulation
from tests.unit.autoscaler.builders import (
    fits,
    make_machine,
    make_machine_set,
    make_node,
    make_pod,
)

JSON = dict[str, Any]


def plan_for(pods_on_idle: list[JSON], config: AutoscalerConfig | None = None,
             pdbs: list[JSON] | None = None, idle_annotations: dict[str, str] | None = None,
             min_size: int = 0, other_pods: list[JSON] | None = None) -> ScaleDownPlan:
    """Two worker nodes of one MachineSet: ``idle`` (the candidate) and ``busy`` (room left)."""
    config = config or AutoscalerConfig()
    nodes = [make_node("idle", annotations=idle_annotations), make_node("busy")]
    machine_set = make_machine_set("w", 2, min_size=min_size)
    machines = [make_machine("m-idle", "w", "idle"), make_machine("m-busy", "w", "busy")]
    pods = [*pods_on_idle, *(other_pods or [make_pod("steady", cpu="2500m", node="busy")])]
    view = build_cluster_view([machine_set], machines, nodes)
    sim = Simulation.build(fits, nodes, pods)
    by_node: dict[str, list[JSON]] = {}
    for pod in pods:
        by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
    totals = cluster_totals(nodes, config.limits)
    return find_unneeded(nodes, by_node, view, sim, config, pdbs or [], totals)


def on_idle(name: str = "p", **kw: Any) -> JSON:
    return make_pod(name, cpu="500m", node="idle", **kw)


def pdb(disruptions: int, namespace: str = "ns") -> JSON:
    return {"metadata": {"name": "budget", "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": "p"}}},
            "status": {"disruptionsAllowed": disruptions}}


def test_idle_node_is_unneeded_and_its_pod_moves() -> None:
    plan = plan_for([on_idle()])
    assert [(u.node, u.pods_to_move) for u in plan.unneeded] == [("idle", ("ns/p",))]
    assert plan.unremovable["busy"] == "NotUnderutilized"


@pytest.mark.parametrize(("kwargs", "reason", "detail"), [
    ({"pods_on_idle": [on_idle(annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})]},
     "BlockedByPod", "NotSafeToEvictAnnotation"),
    ({"pods_on_idle": [on_idle(owner=None)]}, "BlockedByPod", "NotReplicated"),
    ({"pods_on_idle": [on_idle(namespace="kube-system")]}, "BlockedByPod",
     "UnmovableKubeSystemPod"),
    ({"pods_on_idle": [on_idle(volumes=[{"name": "scratch", "emptyDir": {}}])]},
     "BlockedByPod", "LocalStorageRequested"),
    ({"pods_on_idle": [on_idle(volumes=[{"name": "h", "hostPath": {"path": "/x"}}])]},
     "BlockedByPod", "LocalStorageRequested"),
    ({"pods_on_idle": [on_idle()], "pdbs": [pdb(0)]}, "BlockedByPod", "NotEnoughPdb"),
    ({"pods_on_idle": [on_idle("p"), on_idle("q", labels={"app": "p"})], "pdbs": [pdb(1)]},
     "BlockedByPod", "NotEnoughPdb"),
    ({"pods_on_idle": [on_idle(node_selector={"only": "here"})]}, "NoPlaceToMovePods", "ns/p"),
    ({"pods_on_idle": [make_pod("p", cpu="1800m", node="idle")]}, "NoPlaceToMovePods", "ns/p"),
    ({"pods_on_idle": [], "idle_annotations": {
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}},
     "ScaleDownDisabledAnnotation", ""),
    ({"pods_on_idle": [], "min_size": 2}, "NodeGroupMinSizeReached", ""),
    ({"pods_on_idle": [make_pod("half", cpu="2", node="idle")]}, "NotUnderutilized", ""),
    ({"pods_on_idle": [], "config": AutoscalerConfig(
        limits=ResourceLimits(cores=ResourceRange(8, 100)))},
     "MinimalResourceLimitExceeded", "cpu"),
])
def test_each_blocker_keeps_its_node(kwargs: dict[str, Any], reason: str, detail: str) -> None:
    plan = plan_for(**kwargs)
    assert [u.node for u in plan.unneeded] == []
    assert plan.unremovable["idle"] == reason
    assert detail in plan.messages["idle"]


@pytest.mark.parametrize("kwargs", [
    # "true" overrides every rule but the PDB ...
    {"pods_on_idle": [on_idle(owner=None, volumes=[{"name": "s", "emptyDir": {}}], annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})]},
    # ... a PDB makes a kube-system pod movable ...
    {"pods_on_idle": [on_idle(namespace="kube-system")], "pdbs": [pdb(1, "kube-system")]},
    # ... local storage is fine when the user says so, and pods below the threshold never block,
    {"pods_on_idle": [on_idle(volumes=[{"name": "s", "emptyDir": {}}])],
     "config": AutoscalerConfig(skip_nodes_with_local_storage=False)},
    {"pods_on_idle": [on_idle(owner=None, priority=-100)]},
    {"pods_on_idle": [on_idle(owner="DaemonSet", node_selector={"only": "here"})]},
    {"pods_on_idle": [on_idle(volumes=[{"name": "s", "emptyDir": {}}], annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "s"})]},
])
def test_overrides_let_the_node_go(kwargs: dict[str, Any]) -> None:
    plan = plan_for(**kwargs)
    assert [u.node for u in plan.unneeded] == ["idle"], plan.messages


def test_two_idle_nodes_are_not_emptied_into_the_same_room() -> None:
    nodes = [make_node("a"), make_node("b"), make_node("c")]
    view = build_cluster_view([make_machine_set("w", 3)],
                              [make_machine(f"m-{n}", "w", n) for n in "abc"], nodes)
    pods = [make_pod("pa", cpu="1500m", node="a"), make_pod("pb", cpu="1500m", node="b"),
            make_pod("pc", cpu="1000m", node="c")]
    sim = Simulation.build(fits, nodes, pods)
    by_node = {p["spec"]["nodeName"]: [p] for p in pods}
    config = AutoscalerConfig()
    totals = cluster_totals(nodes, config.limits)
    plan = find_unneeded(nodes, by_node, view, sim, config, [], totals)
    # c (least used) empties into a; a, now holding pa and pc, empties into b; b must stay.
    assert [(u.node, u.pods_to_move) for u in plan.unneeded] == [
        ("c", ("ns/pc",)), ("a", ("ns/pa", "ns/pc"))]
    assert plan.unremovable["b"] == "NoPlaceToMovePods"


def test_unneeded_time_and_removal_batches() -> None:
    config = replace(AutoscalerConfig(), scale_down=ScaleDownConfig(unneeded_time=60))
    plan = plan_for([on_idle()], config)
    since = track_unneeded({}, plan, now=100.0)
    assert select_removals(plan, since, 130.0, config) == []
    assert [u.node for u in select_removals(plan, since, 160.0, config)] == ["idle"]
    assert track_unneeded(since, ScaleDownPlan(), 170.0) == {}


@pytest.mark.parametrize(("cooldown", "now", "waiting"), [
    (Cooldown(last_scale_up=0), 599, "delayAfterAdd"),
    (Cooldown(last_scale_up=0), 600, None),
    (Cooldown(last_scale_down=0), 9, "delayAfterDelete"),
    (Cooldown(last_failure=0), 179, "delayAfterFailure"),
    (Cooldown(), 0, None),
])
def test_cooldowns(cooldown: Cooldown, now: float, waiting: str | None) -> None:
    reason = cooldown_reason(AutoscalerConfig(), cooldown, now)
    assert (reason is None) if waiting is None else (waiting in (reason or ""))


def test_empty_nodes_go_together_but_one_busy_node_per_loop() -> None:
    config = AutoscalerConfig()
    plan = ScaleDownPlan(unneeded=(
        Unneeded("busy-1", "g", 0.2, ("ns/a",)), Unneeded("busy-2", "g", 0.2, ("ns/b",)),
        Unneeded("empty-1", "g", 0.0, ()), Unneeded("empty-2", "g", 0.0, ())))
    since = {u.node: 0.0 for u in plan.unneeded}
    chosen = [u.node for u in select_removals(plan, since, 10_000.0, config)]
    assert chosen == ["empty-1", "empty-2", "busy-1"]


def test_min_size_counts_the_nodes_already_chosen() -> None:
    nodes = [make_node(n) for n in ("a", "b", "c")]
    view = build_cluster_view([make_machine_set("w", 3, min_size=1)],
                              [make_machine(f"m-{n}", "w", n) for n in "abc"], nodes)
    config = AutoscalerConfig()
    sim = Simulation.build(fits, nodes, [])
    plan = find_unneeded(nodes, {}, view, sim, config, [], cluster_totals(nodes, config.limits))
    assert len(plan.unneeded) == 2
    assert list(plan.unremovable.values()) == ["NodeGroupMinSizeReached"]


def _unready_plan(heavy_cpu: str, ready: str) -> ScaleDownPlan:
    nodes = [make_node("sick"), make_node("well", cpu="8")]
    nodes[0]["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    view = build_cluster_view([make_machine_set("w", 2)],
                              [make_machine("m-sick", "w", "sick"),
                               make_machine("m-well", "w", "well")], nodes)
    heavy = make_pod("heavy", cpu=heavy_cpu, node="sick")
    pods = [heavy, make_pod("steady", cpu="5", node="well")]  # well stays, 3 cores free
    by_node = {"sick": [heavy], "well": pods[1:]}
    config = AutoscalerConfig()
    sim = Simulation.build(fits, nodes, pods)
    return find_unneeded(nodes, by_node, view, sim, config, [],
                         cluster_totals(nodes, config.limits))


def test_unready_node_keeps_the_utilization_threshold_and_waits_the_unready_time() -> None:
    """cluster-autoscaler core/scaledown/eligibility/eligibility.go
    ``unremovableReasonAndNodeUtilization``: readiness does not exempt a node from the
    utilization threshold (only ``--scale-down-unready-enabled=false`` would keep unready nodes
    altogether); an unready node that is underutilized goes after ``--scale-down-unready-time``
    (20 min, core/scaledown/planner/planner.go) instead of ``--scale-down-unneeded-time``."""
    config = AutoscalerConfig()
    busy = _unready_plan("3", "Unknown")  # 75 %: above the 0.5 threshold
    assert busy.unneeded == ()
    assert busy.unremovable["sick"] == "NotUnderutilized"

    plan = _unready_plan("1", "Unknown")  # 25 %
    assert [(u.node, u.ready, u.pods_to_move) for u in plan.unneeded] == [
        ("sick", False, ("ns/heavy",))]
    since = {"sick": 0.0}
    assert select_removals(plan, since, config.scale_down.unneeded_time, config) == []
    assert [u.node for u in select_removals(plan, since, 20 * 60.0, config)] == ["sick"]

    ready = _unready_plan("1", "True")
    assert [(u.node, u.ready) for u in ready.unneeded] == [("sick", True)]
    assert [u.node for u in select_removals(ready, since, config.scale_down.unneeded_time,
                                            config)] == ["sick"]


@pytest.mark.parametrize(("own", "maximum", "grace"), [
    (None, 600, 30),  # a pod naming none gets Kubernetes' default, not the cap
    (30, 600, 30),
    (900, 600, 600),  # maxPodGracePeriod caps a longer one
    (120, 10, 10),
    (0, 10, 0),
])
def test_evicted_pods_get_at_most_max_pod_grace_period(own: int | None, maximum: int,
                                                       grace: int) -> None:
    """cluster-autoscaler core/scaledown/actuation/drain.go ``evictPod``: the eviction asks for
    the pod's terminationGracePeriodSeconds, capped at --max-graceful-termination-sec (which
    OpenShift's ``maxPodGracePeriod`` sets, clusterautoscaler.go ``AutoscalerArgs``)."""
    pod = make_pod("p", node="idle")
    if own is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = own
    assert eviction_grace_period(pod, maximum) == grace


def test_ignored_daemonset_and_mirror_pods_leave_the_allocatable_too() -> None:
    """cluster-autoscaler simulator/utilization/info.go ``CalculateUtilizationOfResource``:
    with ``--ignore-daemonsets-utilization`` (OpenShift's ``ignoreDaemonsetsUtilization``) and
    ``--ignore-mirror-pods-utilization`` the skipped pods' requests are subtracted from the
    node's allocatable, not only left out of the use: 1 core of 4, with 2 cores of DaemonSet
    pods, is 1/2, not 1/4."""
    node = make_node("n", cpu="4", memory="64Gi")
    daemon = make_pod("agent", cpu="2", node="n", owner="DaemonSet")
    app = make_pod("app", cpu="1", node="n")
    mirror = make_pod("static", cpu="2", node="n", owner=None,
                      annotations={"kubernetes.io/config.mirror": "x"})
    assert utilization(node, [daemon, app], ignore_daemonsets=False) == 0.75
    assert utilization(node, [daemon, app], ignore_daemonsets=True) == 0.5
    assert utilization(node, [mirror, app], ignore_daemonsets=True) == 0.75
    assert utilization(node, [mirror, app], False, ignore_mirror_pods=True) == 0.5
    everything_ignored = make_pod("all", cpu="4", memory="1Gi", node="n", owner="DaemonSet")
    assert utilization(node, [everything_ignored, app], True) == float("inf")
    assert utilization(node, [everything_ignored], True) < 0.5

    config = AutoscalerConfig(ignore_daemonsets_utilization=True)
    plan = plan_for([make_pod("agent", cpu="2", node="idle", owner="DaemonSet"),
                     make_pod("p", cpu="1", node="idle")], config)
    assert plan.unremovable["idle"] == "NotUnderutilized"  # 1/(4-2) is not below 0.5
