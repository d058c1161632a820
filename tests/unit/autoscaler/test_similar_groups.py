"""Similar node groups for ``balanceSimilarNodeGroups``: upstream's comparator tolerances."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.nodegroupset import similar
from berthmaster.operator.autoscaler.scaleup import decide_scale_up, pods_to_help
from berthmaster.operator.autoscaler.simulation import Simulation
from tests.unit.autoscaler.builders import fits, make_machine_set, make_node, make_pod

JSON = dict[str, Any]


def node(cpu: str = "4", memory: str = "8000Mi", allocatable: dict[str, str] | None = None,
         labels: dict[str, str] | None = None) -> JSON:
    made = make_node("n", cpu=cpu, memory=memory, labels=labels)
    made["status"]["allocatable"] = {**made["status"]["capacity"], **(allocatable or {})}
    return made


@pytest.mark.parametrize(("other", "alike"), [
    (node(), True),
    (node(memory="8100Mi"), True),  # 1.23 % more memory capacity: within 1.5 %
    (node(memory="8200Mi"), False),  # 2.4 %: too different
    (node(cpu="8"), False),  # any other capacity must be equal
    (node(allocatable={"memory": "7600Mi"}), True),  # allocatable 5 % lower: within tolerance
    (node(allocatable={"memory": "7590Mi"}), False),  # 5.1 %
    (node(allocatable={"cpu": "3800m"}), True),
    (node(allocatable={"cpu": "3790m"}), False),
    (node(labels={"topology.kubernetes.io/zone": "b", "lifecycle": "spot"}), True),
    (node(labels={"pool": "other"}), False),
])
def test_upstream_tolerances(other: JSON, alike: bool) -> None:
    """cluster-autoscaler processors/nodegroupset compare_nodegroups.go
    ``IsCloudProviderNodeInfoSimilar``: capacity equal except memory within
    MaxCapacityMemoryDifferenceRatio (0.015), allocatable and free within
    MaxAllocatableDifferenceRatio / MaxFreeDifferenceRatio (0.05) of the larger, labels equal
    except BasicIgnoredLabels and the provider labels of clusterapi_nodegroups.go
    ``CreateClusterAPINodeInfoComparator`` (``lifecycle`` among them)."""
    assert similar(node(), other) is alike
    assert similar(other, node()) is alike


def test_balancing_spreads_over_groups_a_little_apart() -> None:
    """Two MachineSets whose memory differs by 1 % are one node group set (upstream balances
    them; exact equality would not)."""
    sets = [make_machine_set("zone-a", 0, memory="8000Mi"),
            make_machine_set("zone-b", 0, memory="8080Mi")]
    nodes = [make_node("control-plane-0")]
    busy = make_pod("busy", cpu="3", node="control-plane-0")
    pods = [busy, *(make_pod(f"p{i}", cpu="3", memory="1Gi", unschedulable=True)
                    for i in range(4))]
    config = replace(AutoscalerConfig(), balance_similar_node_groups=True)
    view = build_cluster_view(sets, [], nodes)
    sim = Simulation.build(fits, nodes, pods)
    totals = cluster_totals(nodes, config.limits)
    pending, _ = pods_to_help(pods, config.pod_priority_threshold)
    decision = decide_scale_up(pending, view, sim, config, totals, (), random.Random(0))
    assert sorted((i.group_id, i.current, i.new) for i in decision.increases) == [
        ("machines/zone-a", 0, 2), ("machines/zone-b", 0, 2)]


def balanced(sets: list[JSON], pods: list[JSON]) -> list[tuple[str, int, int]]:
    nodes = [make_node("control-plane-0")]
    busy = make_pod("busy", cpu="3", node="control-plane-0")
    config = AutoscalerConfig(balance_similar_node_groups=True, expanders=("MostPods",))
    view = build_cluster_view(sets, [], nodes)
    sim = Simulation.build(fits, nodes, [busy, *pods])
    pending, _ = pods_to_help([busy, *pods], config.pod_priority_threshold)
    decision = decide_scale_up(pending, view, sim, config, cluster_totals(nodes, config.limits),
                               (), random.Random(0))
    return sorted((i.group_id, i.current, i.new) for i in decision.increases)


def test_a_similar_group_that_cannot_host_the_pods_gets_none_of_them() -> None:
    """Taints are not compared (compare_nodegroups.go looks at resources and labels only), but
    as upstream's orchestrator ``ComputeSimilarNodeGroups`` a similar group is balanced onto
    only when every pod of the chosen option can schedule on it."""
    tainted = [{"key": "team", "value": "a", "effect": "NoSchedule"}]
    tolerant = [{"key": "team", "operator": "Exists"}]
    pods = [make_pod(f"p{i}", cpu="3", memory="1Gi", unschedulable=True,
                     tolerations=tolerant if i < 2 else None) for i in range(4)]
    sets = [make_machine_set("plain", 0), make_machine_set("tainted", 0, taints=tainted)]
    # MostPods chooses the plain group (all four pods); the tainted one hosts only two of them
    assert balanced(sets, pods) == [("machines/plain", 0, 4)]
    # when every pod tolerates the taint, both groups share the nodes (MostPods ties: either)
    pods = [make_pod(f"p{i}", cpu="3", memory="1Gi", unschedulable=True, tolerations=tolerant)
            for i in range(4)]
    assert balanced(sets, pods) == [("machines/plain", 0, 2), ("machines/tainted", 0, 2)]
