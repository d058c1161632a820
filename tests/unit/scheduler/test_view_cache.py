"""The view caches and the shortcuts that keep large clusters from rebuilding views."""

from __future__ import annotations

import copy
import gc

import pytest

from berthmaster.scheduler import model
from berthmaster.scheduler.descheduler.fit import EngineFit
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView, quantity_value
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, pod_affinity_term, toleration


def versioned(pod: dict, rv: str = "1") -> dict:
    pod["metadata"]["resourceVersion"] = rv
    return pod


def test_the_cache_serves_a_view_while_it_is_held_and_forgets_it_after() -> None:
    pods = [versioned(make_pod(f"p{i}")) for i in range(3)]
    views = [PodView.from_dict(p) for p in pods]
    assert all(PodView.from_dict(p) is v for p, v in zip(pods, views, strict=True))
    del views
    gc.collect()
    assert not any((p["metadata"]["uid"], "1") in model._POD_CACHE for p in pods)


def test_a_snapshot_s_views_are_served_again_and_replaced_versions_dropped() -> None:
    pods = [versioned(make_pod(f"p{i}", node_name="a")) for i in range(10)]
    snap = Snapshot.build(nodes=[make_node("a")], pods=pods)
    # every view the snapshot holds is what from_dict serves again: nothing was rebuilt
    assert all(PodView.from_dict(p) is snap.get_pod(p["metadata"]["uid"]) for p in pods)
    newer = versioned(copy.deepcopy(pods[0]), "2")
    snap.upsert_pod(newer)
    snap.remove_pod(pods[1]["metadata"]["uid"])
    gc.collect()
    assert (pods[0]["metadata"]["uid"], "1") not in model._POD_CACHE  # replaced by version 2
    assert (pods[1]["metadata"]["uid"], "1") not in model._POD_CACHE  # deleted
    assert PodView.from_dict(newer) is snap.get_pod(newer["metadata"]["uid"])


def test_unbound_view_equals_a_view_built_without_node_name() -> None:
    raw = make_pod("p", "team", cpu="250m", memory="1Gi", labels={"app": "web"}, node_name="a",
                   tolerations=[toleration("k", "v", "NoSchedule")], host_ports=[8080],
                   pod_anti_affinity=[pod_affinity_term({"app": "web"})],
                   required_node_terms=[[{"key": "zone", "operator": "Exists"}]],
                   priority=5, owner=("ReplicaSet", "rs", "rs-uid"))
    clone = copy.copy(raw)
    clone["spec"] = {k: v for k, v in raw["spec"].items() if k != "nodeName"}
    shortcut = PodView.from_dict(raw).unbound(clone)
    built = PodView._build(clone)
    for slot in model.VIEW_FIELDS:
        assert getattr(shortcut, slot) == getattr(built, slot), slot
    assert shortcut.raw is clone and shortcut.node_name == ""


def test_quantity_memo_keeps_cpu_and_other_resources_apart() -> None:
    assert quantity_value("cpu", "500m") == 500
    assert quantity_value("memory", "500m") == 1  # half a byte, rounded up
    assert quantity_value("cpu", "500m") == 500
    assert quantity_value("example.com/gpu", "2") == 2
    with pytest.raises(model.QuantityError):
        quantity_value("cpu", "lots")


def test_first_feasible_stops_at_the_first_fit_in_the_given_order() -> None:
    nodes = [make_node("small", cpu="1"), make_node("b", cpu="4"), make_node("c", cpu="4")]
    snap = Snapshot.build(nodes=nodes)
    engine = Engine()
    pod = make_pod("p", cpu="2", node_name="small")  # its own nodeName is ignored
    assert engine.first_feasible(pod, snap, ["small", "missing", "c", "b"]) == "c"
    assert engine.first_feasible(pod, snap, ["small"]) is None
    assert engine.first_feasible(pod, snap, []) is None


def test_node_fit_puts_back_the_same_view_and_counts_the_pod_again() -> None:
    nodes = [make_node("a", cpu="2"), make_node("b", cpu="2")]
    running = versioned(make_pod("web", cpu="1500m", node_name="a"))
    fit = EngineFit(nodes, [running])
    before = fit.view_of(running)
    assert fit(running, "a")  # its own 1.5 cpu does not count against it on its node
    assert fit.any_node(running, ["a", "b"], exclude="a")
    assert fit.feasible(running, ["a", "b"]) == ["a", "b"]
    assert fit.view_of(running) is before
    assert fit.snapshot.node("a").req_cpu == 1500
    other = make_pod("other", cpu="1")
    assert not fit(other, "a") and fit(other, "b")
