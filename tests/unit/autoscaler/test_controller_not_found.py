"""A pod whose controller is gone keeps its node: upstream cluster-autoscaler's
``ControllerNotFound`` (simulator/drainability/rules/replicacount/rule.go, run third in
rules/rules.go ``Default`` because ``--skip-nodes-with-custom-controller-pods`` defaults to
true)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import (
    Controllers,
    PdbBudget,
    Verdict,
    classify,
    controllers_of,
)
from berthmaster.operator.autoscaler.scaledown import pods_to_drain
from tests.unit.autoscaler.builders import make_pod

JSON = dict[str, Any]


def verdict(pod: JSON, controllers: Controllers | None) -> Verdict:
    return classify(pod, AutoscalerConfig(), PdbBudget([]), 0, None, controllers)


@pytest.mark.parametrize(("kind", "message"), [
    ("ReplicaSet", 'replication controller for ns/p is not available, err: replicaset.apps '
                   '"p-rs" not found'),
    ("ReplicationController", 'replication controller for ns/p is not available, err: '
                              'replicationcontroller "p-rs" not found'),
    ("Job", 'job for ns/p is not available: err: job.batch "p-rs" not found'),
    ("StatefulSet", 'statefulset for ns/p is not available: err: statefulset.apps "p-rs" not '
                    'found'),
    ("DaemonSet", 'daemonset for ns/p is not present, err: daemonset.apps "p-rs" not found'),
])
def test_a_pod_whose_controller_is_gone_blocks(kind: str, message: str) -> None:
    """rules/replicacount/rule.go: the controller looked up in its lister; not found blocks
    with ControllerNotFound and upstream's message (the lister's NotFound error after it)."""
    pod = make_pod("p", owner=kind)
    assert verdict(pod, frozenset()) == Verdict("block", "ControllerNotFound", message)
    assert verdict(pod, controllers_of({kind: [{"metadata": {"name": "p-rs",
                                                             "namespace": "ns"}}]})) \
        .reason != "ControllerNotFound"


def test_it_comes_before_safe_to_evict_daemonsets_and_terminal_pods() -> None:
    """rules.go Default: mirror, longterminating, then this rule, before daemonset,
    safetoevict and terminal: even a safe-to-evict or finished pod blocks when its controller is
    gone."""
    safe = make_pod("p", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
    assert verdict(safe, frozenset()).reason == "ControllerNotFound"
    done = make_pod("p", owner="Job")
    done["status"] = {"phase": "Succeeded"}
    assert verdict(done, frozenset()).reason == "ControllerNotFound"
    mirror = make_pod("p", annotations={"kubernetes.io/config.mirror": "x"})
    assert verdict(mirror, frozenset()).action == "ignore"


def test_unknown_kinds_other_groups_and_no_listing_are_not_judged_here() -> None:
    """rules/replicacount/rule.go: no lister for other kinds or for StatefulSets/DaemonSets
    outside ``apps`` (Undefined: the next rules decide); without listers at all the rule does
    nothing."""
    custom = make_pod("p", owner="Workflow")
    assert verdict(custom, frozenset()).reason == "NotReplicated"
    other_group = make_pod("p", owner="StatefulSet")
    other_group["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    assert verdict(other_group, frozenset()).action == "move"
    assert verdict(make_pod("p"), None).action == "move"


def test_the_drain_of_a_removed_node_stops_at_it() -> None:
    pods, blocked = pods_to_drain([make_pod("a"), make_pod("p", owner="Job")],
                                  AutoscalerConfig(), [], controllers=controllers_of(
                                      {"ReplicaSet": [{"metadata": {"name": "a-rs",
                                                                    "namespace": "ns"}}]}))
    assert pods == [] and blocked is not None and blocked.reason == "ControllerNotFound"
