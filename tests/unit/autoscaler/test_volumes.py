"""The autoscaler's simulation judges volumes as the scheduler does (operator/autoscaler/loop.py
``default_placement``: kube-scheduler 1.35's default profile, VolumeBinding included).

Upstream: cluster-autoscaler/simulator/cluster.go (SimulateNodeRemoval: a node whose pods
cannot all be placed elsewhere is ``NoPlaceToMovePods``, "can reschedule only %d out of %d
pods"), whose scheduling simulation runs the scheduler framework's filters, VolumeBinding among
them (kube-scheduler pkg/scheduler/framework/plugins/volumebinding/binder.go: a bound volume's
node affinity, FindMatchingVolume for a delayed claim, checkVolumeProvisions for dynamic
provisioning — which a template node passes, so such a pod still triggers a scale-up).
"""

from __future__ import annotations

import random
from typing import Any

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.loop import default_placement
from berthmaster.operator.autoscaler.scaledown import NO_PLACE_TO_MOVE_PODS, find_unneeded
from berthmaster.operator.autoscaler.scaleup import decide_scale_up, pods_to_help
from berthmaster.operator.autoscaler.simulation import Simulation
from berthmaster.scheduler.plugins.volume_binding import REASON_BIND_CONFLICT
from berthmaster.scheduler.volume_objects import VolumeObjects
from tests.support.builders import (
    claim_volume,
    make_claim,
    make_storage_class,
    make_volume,
)
from tests.unit.autoscaler.builders import make_machine, make_machine_set, make_node, make_pod

JSON = dict[str, Any]
PLACEMENT = default_placement()


def volumes(pvs: list[JSON], pvcs: list[JSON], classes: list[JSON] | None = None
            ) -> VolumeObjects:
    return VolumeObjects(tuple(pvs), tuple(pvcs),
                         tuple(classes if classes is not None else [make_storage_class()]))


def scale_down(pods: list[JSON], found: VolumeObjects) -> Any:
    """Three nodes of one MachineSet: ``pinned`` and ``free`` (candidates, one 500m pod each)
    and ``keeper`` (too busy to go, room for both pods)."""
    config = AutoscalerConfig()
    nodes = [make_node("pinned"), make_node("free"), make_node("keeper")]
    machines = [make_machine(f"m-{n['metadata']['name']}", "w", n["metadata"]["name"])
                for n in nodes]
    view = build_cluster_view([make_machine_set("w", 3)], machines, nodes)
    pods = [*pods, make_pod("steady", cpu="2500m", node="keeper")]
    sim = Simulation.build(PLACEMENT, nodes, pods, **found.snapshot_args())
    by_node: dict[str, list[JSON]] = {}
    for pod in pods:
        by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
    return find_unneeded(nodes, by_node, view, sim, config, [],
                         cluster_totals(nodes, config.limits))


def test_a_pod_on_a_local_volume_pinned_to_its_node_keeps_the_node() -> None:
    """simulator/cluster.go SimulateNodeRemoval: the pod's claim is bound to a volume whose node
    affinity admits ``pinned`` only, so it fits no other node: ``NoPlaceToMovePods``; the
    identical node whose identical pod has no claim is unneeded."""
    found = volumes([make_volume("pv-a", node="pinned", claim=("ns", "data"))],
                    [make_claim("data", "ns", volume="pv-a")])
    plan = scale_down([make_pod("db", cpu="500m", node="pinned",
                                volumes=[claim_volume("data")]),
                       make_pod("web", cpu="500m", node="free")], found)
    assert [u.node for u in plan.unneeded] == ["free"]
    assert plan.unremovable["pinned"] == NO_PLACE_TO_MOVE_PODS
    # free's pod was moved onto pinned first (it went first by name): two pods to move there
    assert plan.messages["pinned"] == ("can reschedule only 0 out of 2 pods: no other node for "
                                       "pod ns/db")


def test_a_volume_without_node_affinity_moves_with_its_pod() -> None:
    """Network storage (no node affinity) follows the pod: both nodes are unneeded."""
    found = volumes([make_volume("pv-n", claim=("ns", "data"))],
                    [make_claim("data", "ns", volume="pv-n")])
    plan = scale_down([make_pod("db", cpu="500m", node="pinned",
                                volumes=[claim_volume("data")]),
                       make_pod("web", cpu="500m", node="free")], found)
    assert sorted(u.node for u in plan.unneeded) == ["free", "pinned"]


def scale_up(pods: list[JSON], found: VolumeObjects) -> Any:
    """One busy existing node (``control-plane-0``, 1 of 4 cores free) and an empty MachineSet
    ``workers`` of 4-core nodes; every pending pod needs 3 cores."""
    config = AutoscalerConfig()
    nodes = [make_node("control-plane-0")]
    pods = [make_pod("busy", cpu="3", node="control-plane-0"), *pods]
    view = build_cluster_view([make_machine_set("workers", 0)], [], nodes)
    sim = Simulation.build(PLACEMENT, nodes, pods, **found.snapshot_args())
    pending, _ = pods_to_help(pods, config.pod_priority_threshold)
    totals = cluster_totals(nodes, config.limits, [])
    return decide_scale_up(pending, view, sim, config, totals, (), random.Random(1))


def pending(name: str, claim: str) -> JSON:
    return make_pod(name, cpu="3", memory="1Gi", unschedulable=True,
                    volumes=[claim_volume(claim)])


def test_a_delayed_claim_of_a_provisioning_class_triggers_a_scale_up() -> None:
    """volumebinding/binder.go checkVolumeProvisions: an unbound WaitForFirstConsumer claim of
    a class with a provisioner (and no allowedTopologies) can be provisioned on the template
    node, so the pod triggers a scale-up (cluster-autoscaler's scale-up of pods with late-bound
    volumes)."""
    found = volumes([], [make_claim("fresh", "ns", storage_class="fast")],
                    [make_storage_class("fast", "csi.example.com")])
    decision = scale_up([pending("dyn", "fresh")], found)
    assert [(i.group_id, i.new) for i in decision.increases] == [("machines/workers", 1)]
    assert "ns/dyn" in decision.triggered


def test_a_claim_that_needs_a_static_local_volume_on_an_existing_node_does_not() -> None:
    """volumebinding/binder.go FindPodVolumes: the only volume of the class (no provisioner)
    is pinned to ``control-plane-0``; a template node matches none and cannot provision, so
    the pod is told NotTriggerScaleUp in the scheduler's words."""
    found = volumes([make_volume("pv-cp", node="control-plane-0")],
                    [make_claim("wants-local", "ns")])
    decision = scale_up([pending("static", "wants-local")], found)
    assert not decision.increases
    assert "ns/static" in decision.not_triggered
    assert REASON_BIND_CONFLICT in decision.not_triggered["ns/static"]


def test_volume_objects_build_the_snapshot_by_kind() -> None:
    claim = make_claim("c")
    found = VolumeObjects.by_kind({"PersistentVolumeClaim": [claim],
                                   "StorageClass": [make_storage_class()]})
    args = found.snapshot_args()
    assert args["persistent_volume_claims"] == [claim]
    assert args["persistent_volumes"] == [] and args["csi_nodes"] == []
    assert [c["metadata"]["name"] for c in args["storage_classes"]] == ["local"]
