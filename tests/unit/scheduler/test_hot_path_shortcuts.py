"""Shortcuts on the scheduling hot path give the same answers as the long way round.

- ``PodView.bound`` (used by ``Snapshot.assume``) equals a view built from the bound pod;
- ``Snapshot.confirm`` (an assumed pod seen bound) leaves the snapshot as an upsert would;
- equal node taint sets share one tuple (``model.intern_taints``), which the taint predicate's
  per-decision memo relies on, and its verdicts match ``untolerated_taint`` node by node.
"""

from __future__ import annotations

import copy

from berthmaster.scheduler.model import VIEW_FIELDS, NodeView, PodView
from berthmaster.scheduler.plugins.taint_toleration import (
    REASON,
    TaintToleration,
    detail,
    untolerated_taint,
)
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, taint, toleration


def test_a_bound_view_equals_one_built_from_the_bound_pod() -> None:
    pod = make_pod("p", cpu="250m", labels={"app": "a"},
                   tolerations=[toleration("dedicated", "x", "NoSchedule")])
    pod["metadata"]["resourceVersion"] = "7"
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    shortcut = PodView.from_dict(pod).bound(bound, "n1")
    built = PodView._build(bound)
    for slot in VIEW_FIELDS:
        assert getattr(shortcut, slot) == getattr(built, slot), slot
    assert PodView.from_dict(bound) is shortcut  # cached as from_dict would cache it


def test_assume_counts_the_pod_on_its_node_and_forget_undoes_it() -> None:
    pod = make_pod("p", cpu="500m")
    pod["metadata"]["resourceVersion"] = "3"
    snapshot = Snapshot.build(nodes=[make_node("n1")], pods=[pod])
    snapshot.assume(pod, "n1")
    node = snapshot.node("n1")
    assert node is not None and node.req_cpu == 500
    assert [p.name for p in snapshot.pods_on("n1")] == ["p"]
    snapshot.forget(pod)
    assert node.req_cpu == 0 and snapshot.pods_on("n1") == []


def test_equal_taint_sets_share_one_tuple() -> None:
    a = NodeView.from_dict(make_node("a", taints=[taint("k", "v"), taint("z", "", "NoExecute")]))
    b = NodeView.from_dict(make_node("b", taints=[taint("k", "v"), taint("z", "", "NoExecute")]))
    c = NodeView.from_dict(make_node("c", taints=[taint("k", "other")]))
    assert a.taints is b.taints
    assert a.taints != c.taints
    assert NodeView.from_dict(make_node("d")).taints == ()


def test_the_taint_memo_gives_each_node_its_own_verdict() -> None:
    nodes = [make_node("n0", taints=[taint("k", "v")]),
             make_node("n1", taints=[taint("k", "v")]),
             make_node("n2", taints=[taint("k", "v"), taint("other", "x", "NoExecute")]),
             make_node("n3", taints=[taint("k", "v", "PreferNoSchedule")]),
             make_node("n4")]
    snapshot = Snapshot.build(nodes=nodes)
    pod = PodView.from_dict(make_pod("p", tolerations=[toleration("k", "v", "NoSchedule")]))
    check = TaintToleration().prefilter(pod, snapshot)
    assert callable(check)
    for _ in range(2):  # the second pass is served from the memo
        for info in snapshot.node_list():
            status = check(info)
            bad = untolerated_taint(pod.tolerations, info.taints)
            if bad is None:
                assert status is None, info.name
            else:
                assert status is not None and status.reasons == (REASON,), info.name
                assert status.detail == detail(bad), info.name
    rejected = [n.name for n in snapshot.node_list() if check(n) is not None]
    assert rejected == ["n2"]


def _bound_by_api(pod: dict, node: str, version: str) -> dict:
    """The pod as the watch shows it after the binding: nodeName set, a new resourceVersion."""
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node
    bound["metadata"]["resourceVersion"] = version
    return bound


def test_confirming_an_assumed_pod_equals_upserting_it() -> None:
    """``Snapshot.confirm`` (the watch shows an assumed pod bound where it was assumed) leaves
    the snapshot as ``upsert_pod`` of the API's object would, without rebuilding the view."""
    pod = make_pod("p", cpu="500m", labels={"app": "a"}, pod_anti_affinity=[{
        "labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}])
    pod["metadata"]["resourceVersion"] = "3"
    confirmed = Snapshot.build(nodes=[make_node("n1"), make_node("n2")])
    upserted = Snapshot.build(nodes=[make_node("n1"), make_node("n2")])
    for snapshot in (confirmed, upserted):
        snapshot.assume(pod, "n1")
    from_api = _bound_by_api(pod, "n1", "4")
    assert confirmed.confirm(from_api)
    upserted.upsert_pod(from_api)
    for snapshot in (confirmed, upserted):
        uid = str(pod["metadata"]["uid"])
        assert not snapshot.is_assumed(uid)
        view = snapshot.get_pod(uid)
        assert view is not None and view.raw is from_api
        assert snapshot.pods_on("n1") == [view]
        assert snapshot.pods_with_required_anti[uid] is view
        node = snapshot.node("n1")
        assert node is not None and node.req_cpu == 500 and node.pods[uid] is view
    built = PodView._build(from_api)
    view = confirmed.get_pod(str(pod["metadata"]["uid"]))
    for slot in VIEW_FIELDS:
        assert getattr(view, slot) == getattr(built, slot), slot


def test_a_pod_changed_or_bound_elsewhere_is_not_confirmed() -> None:
    pod = make_pod("p", cpu="500m", labels={"app": "a"})
    pod["metadata"]["resourceVersion"] = "3"
    snapshot = Snapshot.build(nodes=[make_node("n1"), make_node("n2")])
    snapshot.assume(pod, "n1")
    relabelled = _bound_by_api(pod, "n1", "4")
    relabelled["metadata"]["labels"] = {"app": "b"}
    assert not snapshot.confirm(relabelled)
    assert not snapshot.confirm(_bound_by_api(pod, "n2", "4"))
    assert snapshot.is_assumed(str(pod["metadata"]["uid"]))
    other = make_pod("q", cpu="1")
    assert not snapshot.confirm(_bound_by_api(other, "n1", "5"))  # never assumed
