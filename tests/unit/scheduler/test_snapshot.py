"""Snapshot: incremental updates keep totals and indexes right; assume/forget."""

from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, pod_affinity_term


def test_totals_follow_pod_updates():
    snap = Snapshot.build(nodes=[make_node("a")])
    pod = make_pod("p", cpu="500m", node_name="a", host_ports=[80])
    snap.upsert_pod(pod)
    info = snap.node("a")
    assert (info.req_cpu, len(info.pods), dict(info.used_ports)) == (500, 1, {("0.0.0.0", "TCP",
                                                                                80): 1})
    bigger = make_pod("p", cpu="1", node_name="a", uid=pod["metadata"]["uid"])
    snap.upsert_pod(bigger)
    assert info.req_cpu == 1000 and len(info.pods) == 1
    snap.remove_pod(pod["metadata"]["uid"])
    assert (info.req_cpu, len(info.pods), info.used_ports) == (0, 0, {})


def test_pending_pods_use_nothing_and_files_without_uid():
    snap = Snapshot.build(nodes=[make_node("a")])
    pending = make_pod("p", cpu="1")
    del pending["metadata"]["uid"]
    snap.upsert_pod(pending)
    assert snap.get_pod("default/p") is not None and snap.node("a").req_cpu == 0


def test_pods_before_their_node_are_attached_later():
    snap = Snapshot()
    snap.upsert_pod(make_pod("p", cpu="1", node_name="late"))
    snap.upsert_node(make_node("late"))
    assert snap.node("late").req_cpu == 1000


def test_assume_and_forget():
    snap = Snapshot.build(nodes=[make_node("a")])
    pod = make_pod("p", cpu="1")
    snap.upsert_pod(pod)
    snap.assume(pod, "a")
    assert snap.node("a").req_cpu == 1000 and snap.is_assumed(pod["metadata"]["uid"])
    snap.forget(pod)
    assert snap.node("a").req_cpu == 0
    assert snap.get_pod(pod["metadata"]["uid"]).node_name == ""
    snap.assume(pod, "a")
    bound = make_pod("p", cpu="1", node_name="a", uid=pod["metadata"]["uid"])
    snap.upsert_pod(bound)  # the watch confirms the binding
    assert not snap.is_assumed(pod["metadata"]["uid"]) and snap.node("a").req_cpu == 1000


def test_label_index_and_node_removal():
    snap = Snapshot.build(nodes=[make_node("a", labels={"zone": "x"}),
                                 make_node("b", labels={"zone": "x"})])
    assert snap.label_index["zone"]["x"] == {"a", "b"}
    snap.upsert_node(make_node("a", labels={"zone": "y"}))
    assert snap.label_index["zone"] == {"x": {"b"}, "y": {"a"}}
    snap.remove_node("b")
    assert snap.node_names == ["a"] and "x" not in snap.label_index["zone"]


def test_term_index_counts_pods_per_node():
    snap = Snapshot.build(nodes=[make_node("a")])
    term = pod_affinity_term({"app": "x"})
    p1 = make_pod("p1", node_name="a", pod_anti_affinity=[term])
    p2 = make_pod("p2", node_name="a", pod_anti_affinity=[term])
    snap.upsert_pod(p1)
    snap.upsert_pod(p2)
    (by_node,) = snap.term_index["anti_required"].values()
    assert by_node == {"a": 2}
    snap.remove_pod(p1["metadata"]["uid"])
    snap.remove_pod(p2["metadata"]["uid"])
    assert snap.term_index["anti_required"] == {}


def test_other_kinds_and_errors():
    snap = Snapshot()
    svc = {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"}}}
    snap.upsert("Service", svc)
    assert "ns/web" in snap.services
    snap.remove("Service", svc)
    assert not snap.services
    try:
        snap.upsert("Deployment", {})
    except ValueError as exc:
        assert "unsupported kind 'Deployment'" in str(exc)
    else:
        raise AssertionError("expected ValueError")
