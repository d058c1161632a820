"""Queueing hints that read the pod or the node: a parked pod is retried only when it could fit.

Upstream's queueing hints (interpodaffinity and tainttoleration ``isSchedulableAfter...``):
an added pod never lifts anti-affinity, and a node's taint change helps only a pod that
tolerates the node's taints now. A node flapping NotReady (the node lifecycle controller's
not-ready/unreachable taints) therefore no longer wakes every pod a taint once kept off some
node, and each new pod bound no longer wakes every pod parked for anti-affinity.
"""

from __future__ import annotations

from berthmaster.scheduler.daemon.hints import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_UPDATE,
    POD_SCALE_DOWN,
    ClusterEvent,
    could_help,
)
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, pod_affinity_term, taint, toleration

NOT_READY = taint("node.kubernetes.io/not-ready", effect="NoSchedule")


def parked(pod: dict, nodes: list[dict], pods: list[dict]) -> frozenset[str]:
    """The events the engine registers for ``pod``, found unschedulable on this cluster."""
    engine = Engine()
    decision = engine.schedule(pod, Snapshot.build(nodes=nodes, pods=pods))
    assert decision.node is None
    return engine.unschedulable_events(decision, PodView.from_dict(pod))


def test_an_added_pod_does_not_wake_a_pod_parked_for_anti_affinity() -> None:
    anti = make_pod("new", labels={"app": "web"},
                    pod_anti_affinity=[pod_affinity_term({"app": "web"})])
    registered = parked(anti, [make_node("a")],
                        [make_pod("old", labels={"app": "web"}, node_name="a")])
    assert not could_help(anti, ClusterEvent(ASSIGNED_POD_ADD), registered)
    assert could_help(anti, ClusterEvent(ASSIGNED_POD_DELETE), registered)


def test_an_added_pod_wakes_a_pod_parked_for_required_affinity() -> None:
    affine = make_pod("new", pod_affinity=[pod_affinity_term({"app": "db"})])
    registered = parked(affine, [make_node("a")], [])
    assert could_help(affine, ClusterEvent(ASSIGNED_POD_ADD), registered)


def test_a_taint_change_wakes_only_a_pod_that_tolerates_the_node_now() -> None:
    pod = make_pod("new", cpu="1")
    registered = parked(pod, [make_node("a", taints=[NOT_READY])], [])
    still_tainted = ClusterEvent(NODE_UPDATE, frozenset({"taints"}),
                                 make_node("a", taints=[NOT_READY, taint("other")]))
    clean = ClusterEvent(NODE_UPDATE, frozenset({"taints"}), make_node("a"))
    cordoned = ClusterEvent(NODE_UPDATE, frozenset({"taints", "unschedulable"}),
                            make_node("a", unschedulable=True))
    assert not could_help(pod, still_tainted, registered)
    assert could_help(pod, clean, registered)
    assert not could_help(pod, cordoned, registered)
    tolerant = make_pod("tolerant", cpu="1", tolerations=[toleration(operator="Exists")])
    assert could_help(tolerant, still_tainted, registered) and could_help(tolerant, cordoned,
                                                                           registered)


def test_a_taint_change_with_other_interests_still_wakes_the_pod() -> None:
    """When another rejecting predicate asked for the same event, the pod is retried."""
    pod = make_pod("new", cpu="1")
    registered = frozenset({"Node/UpdateNodeTaint", "Node/UpdateNodeLabel"})
    event = ClusterEvent(NODE_UPDATE, frozenset({"taints", "labels"}),
                         make_node("a", taints=[NOT_READY]))
    assert could_help(pod, event, registered)


def test_a_scale_down_wakes_only_a_pod_parked_by_resources_that_wants_what_was_freed() -> None:
    """NodeResourcesFit registers Pod/UpdatePodScaleDown with its queueing hint
    (pkg/scheduler/framework/plugins/noderesources/fit.go, EventsToRegister and
    isSchedulableAfterPodScaleDown)."""
    wants_cpu = make_pod("new", cpu="2")
    old = make_pod("old", cpu="3", memory="1Gi", node_name="a")
    registered = parked(wants_cpu, [make_node("a", cpu="4")], [old])
    assert "Pod/UpdatePodScaleDown" in registered
    cpu_down = make_pod("old", cpu="1", memory="1Gi", node_name="a")
    memory_down = make_pod("old", cpu="3", memory="512Mi", node_name="a")
    for pod in (old, cpu_down, memory_down):
        pod["metadata"]["uid"] = "uid-old"
    assert could_help(wants_cpu, ClusterEvent(POD_SCALE_DOWN, pods=(old, cpu_down)), registered)
    assert not could_help(wants_cpu, ClusterEvent(POD_SCALE_DOWN, pods=(old, memory_down)),
                          registered)
