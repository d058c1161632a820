"""Shortcuts on the scheduling hot path give the same answers as the long way round.

- ``PodView.bound`` (used by ``Snapshot.assume``) equals a view built from the bound pod;
- equal node taint sets share one tuple (``model.intern_taints``), which the taint predicate's
  per-decision memo relies on, and its verdicts match ``untolerated_taint`` node by node.
"""

from __future__ import annotations

import copy

from berthmaster.scheduler.model import NodeView, PodView
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
    for slot in PodView.__slots__:
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
