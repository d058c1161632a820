"""Coscheduling's pure parts: its arguments, PreFilter's refusals, the cluster-resource check
and the queue sort key.

Upstream: kubernetes-sigs/scheduler-plugins pkg/coscheduling/coscheduling.go (Less, PreFilter,
Permit) and pkg/coscheduling/core/core.go (PreFilter's messages, CheckClusterResource,
getNodeResource), apis/config/v1/defaults.go and apis/config/validation/
validation_pluginargs.go (ValidateCoschedulingArgs).
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.framework import ArgErrors
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import coscheduling as cs
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod

NS = "default"


def group(name: str, min_member: int, created: str = "2026-01-01T00:00:00Z",
          **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS, "creationTimestamp": created},
            "spec": {"minMember": min_member, **spec}}


def member(name: str, pg: str, cpu: str = "1", node: str | None = None) -> dict[str, Any]:
    return make_pod(name, NS, cpu=cpu, labels={cs.POD_GROUP_LABEL: pg}, node_name=node)


def snapshot(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
             groups: list[dict[str, Any]]) -> Snapshot:
    snap = Snapshot.build(nodes=nodes, pods=pods)
    snap.watch_kind(cs.KIND)
    for pg in groups:
        snap.upsert(cs.KIND, pg)
    return snap


def refusal(pod: dict[str, Any], snap: Snapshot) -> str | None:
    result = cs.Coscheduling().prefilter(PodView.from_dict(pod), snap)
    if result is None:
        return None
    assert not callable(result)
    assert result.unresolvable  # PreFilter refusals never invite preemption
    return result.reasons[0]


def test_args_default_and_validate_as_scheduler_plugins() -> None:
    errors = ArgErrors()
    assert cs.parse_args({}, errors) == {"permitWaitingTimeSeconds": 60,
                                         "podGroupBackoffSeconds": 0,
                                         "podGroupRejectPercentage": 10}
    assert not errors
    cs.parse_args({"permitWaitingTimeSeconds": -1, "podGroupRejectPercentage": 101,
                   "minMember": 2}, errors)
    assert [(what, where, detail) for what, where, _, detail in errors.items] == [
        ("unknown", "minMember", ""),
        ("invalid", "permitWaitingTimeSeconds", "must be greater than 0"),
        ("invalid", "podGroupRejectPercentage", "must be between 0 and 100"),
    ]


@pytest.mark.parametrize(("pods", "groups", "wanted"), [
    # no group: Coscheduling has nothing to say
    ([make_pod("p", NS, cpu="1")], [], None),
    # fewer pods than minMember (core.go PreFilter)
    ([member("p", "g")], [group("g", 2)],
     "pre-filter pod p cannot find enough sibling pods, current pods number: 1, minMember of "
     "group: 2"),
    ([member("p", "g"), member("q", "g")], [group("g", 2)], None),
    # the label names no PodGroup, or is empty: say what to fix
    ([member("p", "gone")], [],
     'PodGroup not found: "default/gone" (named by the pod\'s label '
     '"scheduling.x-k8s.io/pod-group"); create the PodGroup or correct the label'),
    ([member("p", "")], [],
     'pod label "scheduling.x-k8s.io/pod-group" is empty: set it to the name of a PodGroup in '
     'namespace "default", or remove the label'),
    # minResources beyond what the cluster has free (with pods: minMember)
    ([member("p", "g")], [group("g", 1, minResources={"cpu": "9"})],
     "resource gap: map[cpu:1000]"),
    ([member("p", "g")], [group("g", 1, minResources={"cpu": "8"})], None),
])
def test_prefilter(pods: list[dict[str, Any]], groups: list[dict[str, Any]],
                   wanted: str | None) -> None:
    snap = snapshot([make_node("a", cpu="4"), make_node("b", cpu="4")], pods, groups)
    assert refusal(pods[0], snap) == wanted


def test_the_groups_own_placed_pods_count_as_free() -> None:
    """getNodeResource removes the group's own pods from each node before comparing."""
    nodes = [make_node("a", cpu="4")]
    placed = [member("p", "g", cpu="3", node="a")]
    snap = snapshot(nodes, placed, [])
    assert cs.resource_gap(snap.node_list(), {"cpu": 4000}, "default/g") == {}
    assert cs.resource_gap(snap.node_list(), {"cpu": 4000}, "default/other") == {"cpu": 3000}


def test_the_queue_sort_keeps_a_group_together() -> None:
    """Less: priority, then the group's creation time (a pod of no group: its first queueing
    time), then namespace/name."""
    snap = snapshot([], [], [group("early", 2, "2026-01-01T00:00:00Z"),
                             group("late", 2, "2026-01-02T00:00:00Z")])

    class Handle:
        snapshot = snap

        def predicate(self, name: str) -> None:
            return None

    sort = cs.CoschedulingLifecycle(handle=Handle()).sort_key  # type: ignore[arg-type]
    late_first = member("a-late", "late")
    early = member("z-early", "early")
    loner = make_pod("m-loner", NS)
    first_seen = 1_800_000_000.0  # after both groups were created
    keys = sorted([(sort(late_first, 0, 1.0), "a-late"), (sort(early, 0, 1.0), "z-early"),
                   (sort(loner, 0, first_seen), "m-loner"),
                   (sort(member("b-late", "late"), 0, 1.0), "b-late"),
                   (sort(member("urgent", "late"), 5, 1.0), "urgent")])
    assert [name for _, name in keys] == ["urgent", "z-early", "a-late", "b-late", "m-loner"]


@pytest.mark.parametrize(("spec", "args", "wanted"), [
    ({"scheduleTimeoutSeconds": 5}, 60.0, 5.0),
    ({}, 30.0, 30.0),
    ({}, 0.0, 60.0),  # pkg/util/podgroup.go DefaultWaitTime
])
def test_schedule_timeout(spec: dict[str, Any], args: float, wanted: float) -> None:
    assert cs.schedule_timeout(group("g", 1, **spec), args) == wanted


def test_the_group_index_agrees_with_a_walk_over_every_pod() -> None:
    """Snapshot.group_members against the plain filter, through add, assume, forget and
    removal."""
    p, q, r = member("p", "g"), member("q", "g"), member("r", "h")
    snap = snapshot([make_node("a")], [p, q, r, make_pod("s", NS)], [])

    def walked(name: str) -> set[str]:
        return {v.name for v in snap.pods.values()
                if v.namespace == NS and v.labels.get(cs.POD_GROUP_LABEL) == name}

    def indexed(name: str) -> set[str]:
        return {v.name for v in snap.group_members(NS, name)}

    assert indexed("g") == walked("g") == {"p", "q"}
    snap.assume(p, "a")
    assert cs.placed_count(snap, NS, "g") == 1
    assert indexed("g") == walked("g")
    snap.forget(p)
    assert cs.placed_count(snap, NS, "g") == 0
    snap.remove_pod(q["metadata"]["uid"])
    assert indexed("g") == walked("g") == {"p"}
    assert indexed("h") == walked("h") == {"r"}
    assert indexed("none") == set()


def test_the_example_gang_and_configuration_agree() -> None:
    """examples/coscheduling: the configuration loads with Coscheduling as the queue sort, and
    the gang's PodGroup has as many pods as its minMember, labelled with its name."""
    from pathlib import Path

    import yaml

    from berthmaster.scheduler.config import load_config

    example = Path(__file__).resolve().parents[3] / "examples" / "coscheduling"
    config = load_config((example / "scheduler-config.yaml").read_text(), "example")
    assert dict(config.profiles[0].point_order)["queueSort"] == ("Coscheduling",)
    docs = [d for d in yaml.safe_load_all((example / "gang.yaml").read_text()) if d]
    (group,) = [d for d in docs if d["kind"] == "PodGroup"]
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert len(pods) == group["spec"]["minMember"]
    assert {p["metadata"]["labels"][cs.POD_GROUP_LABEL] for p in pods} == {
        group["metadata"]["name"]}
    assert {p["spec"]["schedulerName"] for p in pods} == {config.profiles[0].scheduler_name}
