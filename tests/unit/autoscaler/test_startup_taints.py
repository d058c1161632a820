"""Startup taints (``startupTaints``): a node still starting counts as coming, not as ready."""

from __future__ import annotations

import random
from typing import Any

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.scaledown import find_unneeded
from berthmaster.operator.autoscaler.scaleup import decide_scale_up, pods_to_help
from berthmaster.operator.autoscaler.simulation import Simulation
from berthmaster.operator.autoscaler.template import TAINTS_KEY
from tests.unit.autoscaler.builders import (
    fits,
    make_machine,
    make_machine_set,
    make_node,
    make_pod,
)

JSON = dict[str, Any]
STARTING = {"key": "node.example.com/initializing", "effect": "NoSchedule"}
CONFIG = AutoscalerConfig(startup_taints=("node.example.com/initializing",))


def test_the_template_node_leaves_startup_taints_out() -> None:
    """cluster-autoscaler utils/taints ``SanitizeTaints``: configured startup taints and the
    ``startup-taint.`` / ``ignore-taint.cluster-autoscaler.kubernetes.io/`` prefixes are not on
    the template node; other taints stay."""
    machine_set = make_machine_set("w", 1, annotations={TAINTS_KEY: ",".join([
        "startup-taint.cluster-autoscaler.kubernetes.io/cni=:NoSchedule",
        "ignore-taint.cluster-autoscaler.kubernetes.io/old=:NoSchedule",
        "dedicated=gpu:NoSchedule"])})
    nodes = [make_node("w-1", taints=[STARTING, {"key": "team", "effect": "NoSchedule"}])]
    view = build_cluster_view([machine_set], [make_machine("m-1", "w", "w-1")], nodes,
                              CONFIG.startup_taints)
    template = view.groups[0].template
    assert template is not None
    assert sorted(t["key"] for t in template["spec"]["taints"]) == ["dedicated", "team"]


def scale_up_for(node_taints: list[JSON], config: AutoscalerConfig = CONFIG
                 ) -> tuple[list[str], tuple[str, ...]]:
    nodes = [make_node("control-plane-0"), make_node("w-1", taints=node_taints)]
    busy = make_pod("busy", cpu="3", node="control-plane-0")
    pending = make_pod("new", cpu="3", unschedulable=True)
    machine_set = make_machine_set("w", 1)
    view = build_cluster_view([machine_set], [make_machine("m-1", "w", "w-1")], nodes,
                              config.startup_taints)
    sim = Simulation.build(fits, nodes, [busy, pending])
    upcoming = [(g.template, g.upcoming - len(g.starting_nodes)) for g in view.groups
                if g.template is not None]
    totals = cluster_totals(nodes, config.limits, upcoming)
    help_them, _ = pods_to_help([busy, pending], config.pod_priority_threshold)
    decision = decide_scale_up(help_them, view, sim, config, totals, (), random.Random(0))
    return [i.group_id for i in decision.increases], decision.waiting


def test_a_node_with_a_startup_taint_is_waited_for_not_scaled_around() -> None:
    """cluster-autoscaler utils/taints ``FilterOutNodesWithStartupTaints``: a node still
    carrying a startup taint is unready but counted as coming, so a pod that will fit it once
    the taint is gone causes no new node (FAQ "How does Cluster Autoscaler treat nodes with
    status/startup/ignore taints?")."""
    assert scale_up_for([STARTING]) == ([], ("ns/new",))
    # Not configured as a startup taint, it is the group's own taint: nothing can help the pod.
    assert scale_up_for([STARTING], AutoscalerConfig()) == ([], ())
    # The same as an empty ready node, which the scheduler will use.
    assert scale_up_for([]) == ([], ("ns/new",))


def test_a_starting_node_is_judged_as_unready_for_scale_down() -> None:
    """Upstream treats a startup-tainted node as unready: the unready time
    (--scale-down-unready-time) instead of unneededTime; the utilization threshold still holds
    (core/scaledown/eligibility/eligibility.go)."""
    nodes = [make_node("starting", taints=[STARTING]), make_node("well", cpu="8")]
    heavy = make_pod("heavy", cpu="1", node="starting")  # 25 %: below the 0.5 threshold
    steady = make_pod("steady", cpu="5", node="well")
    heavy["spec"]["tolerations"] = [{"key": STARTING["key"], "operator": "Exists"}]
    view = build_cluster_view([make_machine_set("w", 2)],
                              [make_machine("m-s", "w", "starting"),
                               make_machine("m-w", "w", "well")], nodes, CONFIG.startup_taints)
    sim = Simulation.build(fits, nodes, [heavy, steady])
    plan = find_unneeded(nodes, {"starting": [heavy], "well": [steady]}, view, sim, CONFIG, [],
                         cluster_totals(nodes, CONFIG.limits))
    assert [(u.node, u.ready) for u in plan.unneeded] == [("starting", False)]
