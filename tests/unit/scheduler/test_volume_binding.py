"""VolumeBinding's filter and Reserve, pure (no API server): the cases follow kube-scheduler
1.35's ``pkg/scheduler/framework/plugins/volumebinding/binder.go`` (FindPodVolumes,
AssumePodVolumes) and ``k8s.io/component-helpers/storage/volume/pv_helpers.go``
(FindMatchingVolume, GetBindVolumeToClaim)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.daemon.volumes import PV, PVC, VolumeBinder
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import volume_binding as vb
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod

HOST = "kubernetes.io/hostname"


def pv(name: str, *, cls: str = "local", size: str = "10Gi", node: str | None = "n1",
       modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str = "Available",
       claim: dict[str, Any] | None = None, rv: str = "10", **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": rv, "labels": spec.pop("labels", {})},
        "spec": {"storageClassName": cls, "capacity": {"storage": size},
                 "accessModes": list(modes), **spec},
        "status": {"phase": phase}}
    if node is not None:
        out["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": [node]}]}]}}
    if claim is not None:
        out["spec"]["claimRef"] = claim
    return out


def pvc(name: str, *, cls: str = "local", size: str = "1Gi", volume: str = "",
        annotations: dict[str, str] | None = None, rv: str = "5", **spec: Any) -> dict[str, Any]:
    return {"kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "resourceVersion": rv, "annotations": dict(annotations or {})},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}},
                     **({"volumeName": volume} if volume else {}), **spec}}


def sc(name: str = "local", provisioner: str = vb.NO_PROVISIONER,
       mode: str = "WaitForFirstConsumer", **extra: Any) -> dict[str, Any]:
    return {"kind": "StorageClass", "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": mode, **extra}


BOUND = {vb.ANN_BIND_COMPLETED: "yes"}
ZONE_TOPOLOGY = [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]


def nodes() -> list[dict[str, Any]]:
    return [make_node("n1", labels={HOST: "n1", "zone": "a"}),
            make_node("n2", labels={HOST: "n2", "zone": "b"})]


def pod_with(*claims: str) -> dict[str, Any]:
    return make_pod("p", volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}}
                                  for c in claims])


def snap(pvs: list[dict[str, Any]], pvcs: list[dict[str, Any]],
         classes: list[dict[str, Any]] | None = None) -> Snapshot:
    return Snapshot.build(nodes=nodes(), persistent_volumes=pvs, persistent_volume_claims=pvcs,
                          storage_classes=[sc()] if classes is None else classes)


NODE_CONFLICT = (vb.REASON_NODE_CONFLICT,)
BIND_CONFLICT = (vb.REASON_BIND_CONFLICT,)

# (id, volumes, claims, classes, node, want reasons, want static PV names, want provisions)
FILTER_CASES: list[tuple[str, list[Any], list[Any], list[Any] | None, str,
                         tuple[str, ...], list[str], list[str]]] = [
    ("static local PV on its node", [pv("a")], [pvc("c")], None, "n1", (), ["a"], []),
    ("static local PV elsewhere", [pv("a")], [pvc("c")], None, "n2", BIND_CONFLICT, [], []),
    ("too small", [pv("a", size="1Gi")], [pvc("c", size="2Gi")], None, "n1", BIND_CONFLICT,
     [], []),
    ("other class", [pv("a", cls="fast")], [pvc("c")], None, "n1", BIND_CONFLICT, [], []),
    ("access modes", [pv("a", modes=("ReadOnlyMany",))], [pvc("c")], None, "n1",
     BIND_CONFLICT, [], []),
    ("volume mode", [pv("a", volumeMode="Block")], [pvc("c")], None, "n1", BIND_CONFLICT,
     [], []),
    ("claimed by another claim",
     [pv("a", claim={"name": "other", "namespace": "default", "uid": "x"})], [pvc("c")], None,
     "n1", BIND_CONFLICT, [], []),
    ("not Available", [pv("a", phase="Released")], [pvc("c")], None, "n1", BIND_CONFLICT,
     [], []),
    ("selector", [pv("a", labels={"tier": "gold"})],
     [pvc("c", selector={"matchLabels": {"tier": "silver"}})], None, "n1", BIND_CONFLICT,
     [], []),
    ("smallest that fits", [pv("big", size="100Gi"), pv("small", size="2Gi"),
                            pv("tiny", size="1Mi")], [pvc("c")], None, "n1", (), ["small"], []),
    ("pre-bound to this claim wins over smaller ones",
     [pv("small", size="1Gi"),
      pv("mine", size="50Gi", phase="Bound",
         claim={"name": "c", "namespace": "default", "uid": "uid-c"})],
     [pvc("c")], None, "n1", (), ["mine"], []),
    ("one PV for two claims", [pv("a")], [pvc("c"), pvc("d")], None, "n1", BIND_CONFLICT,
     [], []),
    ("two PVs for two claims", [pv("a"), pv("b")], [pvc("c"), pvc("d")], None, "n1", (),
     ["a", "b"], []),
    ("provisioner", [], [pvc("c", cls="dyn")], [sc("dyn", "example.com/csi")], "n2", (),
     [], ["c"]),
    ("no-provisioner and no PV", [], [pvc("c")], None, "n1", BIND_CONFLICT, [], []),
    ("allowedTopologies honoured", [], [pvc("c", cls="dyn")],
     [sc("dyn", "example.com/csi", allowedTopologies=ZONE_TOPOLOGY)], "n2", BIND_CONFLICT,
     [], []),
    ("allowedTopologies met", [], [pvc("c", cls="dyn")],
     [sc("dyn", "example.com/csi", allowedTopologies=ZONE_TOPOLOGY)], "n1", (), [], ["c"]),
    ("selected-node elsewhere", [],
     [pvc("c", cls="dyn", annotations={vb.ANN_SELECTED_NODE: "n1"})],
     [sc("dyn", "example.com/csi")], "n2", BIND_CONFLICT, [], []),
    ("static missing, provisioner takes it", [pv("a", node="n2")], [pvc("c", cls="local")],
     [sc("local", "example.com/csi")], "n1", (), [], ["c"]),
    ("bound claim, volume here", [pv("a", phase="Bound")],
     [pvc("c", volume="a", annotations=BOUND)], None, "n1", (), [], []),
    ("bound claim, volume elsewhere", [pv("a", phase="Bound")],
     [pvc("c", volume="a", annotations=BOUND)], None, "n2", NODE_CONFLICT, [], []),
    ("bound claim, volume gone", [], [pvc("c", volume="a", annotations=BOUND)], None, "n1",
     (vb.REASON_PV_NOT_EXIST,), [], []),
    ("matchFields never match a volume (labels only, as CheckNodeAffinity)",
     [{**pv("a", node=None), "spec": {**pv("a", node=None)["spec"], "nodeAffinity": {
         "required": {"nodeSelectorTerms": [{"matchFields": [
             {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}],
     [pvc("c")], None, "n1", BIND_CONFLICT, [], []),
]


@pytest.mark.parametrize(("volumes", "claims", "classes", "node", "want", "static", "prov"),
                         [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_find_pod_volumes(volumes, claims, classes, node, want, static, prov):
    s = snap(volumes, claims, classes)
    pod = PodView.from_dict(pod_with(*(c["metadata"]["name"] for c in claims)))
    found = vb.pod_volume_claims(pod, s)
    assert isinstance(found, vb.PodVolumeClaims)
    info = s.node(node)
    assert info is not None
    got, reasons = vb.find_pod_volumes(found, s, node, info.labels)
    assert reasons == want
    assert sorted(b.pv["metadata"]["name"] for b in got.static) == static
    assert [c["metadata"]["name"] for c in got.provisions] == prov
    # the predicate says the same through the engine's interface
    check = vb.VolumeBinding().prefilter(pod, s)
    verdict = check(info) if callable(check) else None
    assert (verdict.reasons if verdict else ()) == want
    if verdict:
        assert verdict.unresolvable


CSI = "example.com/csi"
ZONE_A = {"matchLabels": {"zone": "a"}}


def driver(name: str = CSI, capacity: bool | None = True) -> dict[str, Any]:
    spec: dict[str, Any] = {} if capacity is None else {"storageCapacity": capacity}
    return {"kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def capacity(name: str, cls: str = "dyn", topology: dict[str, Any] | None = ZONE_A,
             **sizes: str) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "CSIStorageCapacity",
                           "metadata": {"name": name, "namespace": "kube-system"},
                           "storageClassName": cls, **sizes}
    if topology is not None:
        out["nodeTopology"] = topology
    return out


NOT_ENOUGH = (vb.REASON_NOT_ENOUGH_SPACE,)
# binder.go, checkVolumeProvisions / hasEnoughCapacity: (id, drivers, capacities, claim size,
# node, want reasons)
CAPACITY_CASES: list[tuple[str, list[Any], list[Any], str, str, tuple[str, ...]]] = [
    ("no CSIDriver: not checked", [], [], "5Gi", "n1", ()),
    ("driver does not opt in", [driver(capacity=False)], [], "5Gi", "n1", ()),
    ("driver without the field", [driver(capacity=None)], [], "5Gi", "n1", ()),
    ("opted in, no capacity published", [driver()], [], "5Gi", "n1", NOT_ENOUGH),
    ("capacity enough on the node's topology", [driver()], [capacity("c", capacity="10Gi")],
     "5Gi", "n1", ()),
    ("capacity of another topology", [driver()], [capacity("c", capacity="10Gi")], "5Gi",
     "n2", NOT_ENOUGH),
    ("capacity too small", [driver()], [capacity("c", capacity="4Gi")], "5Gi", "n1",
     NOT_ENOUGH),
    ("exactly the request", [driver()], [capacity("c", capacity="5Gi")], "5Gi", "n1", ()),
    ("maximumVolumeSize wins over capacity", [driver()],
     [capacity("c", capacity="100Gi", maximumVolumeSize="1Gi")], "5Gi", "n1", NOT_ENOUGH),
    ("maximumVolumeSize enough, capacity not", [driver()],
     [capacity("c", capacity="1Gi", maximumVolumeSize="8Gi")], "5Gi", "n1", ()),
    ("capacity of another class", [driver()], [capacity("c", cls="other", capacity="10Gi")],
     "5Gi", "n1", NOT_ENOUGH),
    ("no nodeTopology: available nowhere", [driver()],
     [capacity("c", topology=None, capacity="10Gi")], "5Gi", "n1", NOT_ENOUGH),
    ("empty nodeTopology: everywhere", [driver()], [capacity("c", topology={},
                                                             capacity="10Gi")], "5Gi", "n2", ()),
    ("neither size given", [driver()], [capacity("c")], "5Gi", "n1", NOT_ENOUGH),
    ("bytes rounded up: 1500m bytes needs 2", [driver()], [capacity("c", capacity="1")],
     "1500m", "n1", NOT_ENOUGH),
    ("one of several is enough", [driver()],
     [capacity("small", capacity="1Gi"), capacity("big", topology={}, capacity="9Gi")],
     "5Gi", "n1", ()),
]


@pytest.mark.parametrize(("drivers", "capacities", "size", "node", "want"),
                         [c[1:] for c in CAPACITY_CASES], ids=[c[0] for c in CAPACITY_CASES])
def test_storage_capacity(drivers, capacities, size, node, want):
    s = Snapshot.build(nodes=nodes(), persistent_volume_claims=[pvc("c", cls="dyn", size=size)],
                       storage_classes=[sc("dyn", CSI)], csi_drivers=drivers,
                       csi_storage_capacities=capacities)
    pod = PodView.from_dict(pod_with("c"))
    found = vb.pod_volume_claims(pod, s)
    assert isinstance(found, vb.PodVolumeClaims)
    info = s.node(node)
    assert info is not None
    got, reasons = vb.find_pod_volumes(found, s, node, info.labels)
    assert reasons == want
    assert [c["metadata"]["name"] for c in got.provisions] == ([] if want else ["c"])


def test_claim_without_storage_request_is_not_capacity_checked():
    claim = pvc("c", cls="dyn")
    del claim["spec"]["resources"]
    s = Snapshot.build(nodes=nodes(), persistent_volume_claims=[claim],
                       storage_classes=[sc("dyn", CSI)], csi_drivers=[driver()])
    found = vb.pod_volume_claims(PodView.from_dict(pod_with("c")), s)
    assert isinstance(found, vb.PodVolumeClaims)
    _, reasons = vb.find_pod_volumes(found, s, "n1", {"zone": "a"})
    assert reasons == ()


def test_static_conflict_and_short_storage_are_both_reported_in_upstreams_order():
    """A bound claim elsewhere and a claim to provision without room: FindPodVolumes' order
    (node conflict first, then not enough storage)."""
    s = Snapshot.build(
        nodes=nodes(), persistent_volumes=[pv("a", phase="Bound", node="n2")],
        persistent_volume_claims=[pvc("b", volume="a", annotations=BOUND),
                                  pvc("c", cls="dyn", size="5Gi")],
        storage_classes=[sc(), sc("dyn", CSI)], csi_drivers=[driver()])
    found = vb.pod_volume_claims(PodView.from_dict(pod_with("b", "c")), s)
    assert isinstance(found, vb.PodVolumeClaims)
    _, reasons = vb.find_pod_volumes(found, s, "n1", {"zone": "a", HOST: "n1"})
    assert reasons == (vb.REASON_NODE_CONFLICT, vb.REASON_NOT_ENOUGH_SPACE)


PREFILTER_CASES = [
    ("missing claim", [], None, ('persistentvolumeclaim "c" not found',)),
    ("immediate class", [pvc("c", cls="imm")], [sc("imm", mode="Immediate")],
     (vb.REASON_UNBOUND_IMMEDIATE,)),
    ("unknown class is immediate", [pvc("c", cls="nope")], None,
     (vb.REASON_UNBOUND_IMMEDIATE,)),
    ("pre-bound claim not yet bound", [pvc("c", volume="a")], None,
     (vb.REASON_UNBOUND_IMMEDIATE,)),
    ("lost", [{**pvc("c", volume="a"), "status": {"phase": "Lost"}}], None,
     ('persistentvolumeclaim "c" bound to non-existent persistentvolume "a"',)),
    ("being deleted", [{**pvc("c"), "metadata": {**pvc("c")["metadata"],
                                                  "deletionTimestamp": "2026-01-01T00:00:00Z"}}],
     None, ('persistentvolumeclaim "c" is being deleted',)),
]


@pytest.mark.parametrize(("claims", "classes", "want"), [c[1:] for c in PREFILTER_CASES],
                         ids=[c[0] for c in PREFILTER_CASES])
def test_prefilter_rejects_every_node(claims, classes, want):
    s = snap([], claims, classes)
    status = vb.VolumeBinding().prefilter(PodView.from_dict(pod_with("c")), s)
    assert status is not None and not callable(status)
    assert status.reasons == want and status.unresolvable


def test_ephemeral_claim_name_and_message():
    s = snap([], [])
    pod = make_pod("web", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
        "spec": {"accessModes": ["ReadWriteOnce"]}}}}])
    status = vb.VolumeBinding().prefilter(PodView.from_dict(pod), s)
    assert not callable(status) and status is not None
    assert status.reasons == ('waiting for ephemeral volume controller to create the '
                              'persistentvolumeclaim "web-scratch"',)


def test_bind_volume_to_claim_sets_claim_ref_and_bound_by_controller():
    claim = pvc("c")
    out, dirty = vb.bind_volume_to_claim(pv("a"), claim)
    assert dirty
    assert out["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                       "namespace": "default", "name": "c", "uid": "uid-c",
                                       "resourceVersion": "5"}
    assert out["metadata"]["annotations"] == {vb.ANN_BOUND_BY_CONTROLLER: "yes"}
    assert out["metadata"]["resourceVersion"] == "10"  # PUT with it: a conflict, not a steal
    # pre-bound by a user to this claim: the claimRef gets the uid, no bound-by-controller
    prebound = pv("b", claim={"name": "c", "namespace": "default"})
    out, dirty = vb.bind_volume_to_claim(prebound, claim)
    assert dirty and out["spec"]["claimRef"]["uid"] == "uid-c"
    assert vb.ANN_BOUND_BY_CONTROLLER not in out["metadata"]["annotations"]
    again, dirty = vb.bind_volume_to_claim(out, claim)
    assert not dirty and again == out


def test_reserve_makes_the_next_pod_miss_the_taken_volume():
    s = snap([pv("a")], [pvc("c"), pvc("d")])
    binder = VolumeBinder(kube=None, snapshot=s)  # type: ignore[arg-type]
    first = binder.reserve(pod_with("c"), "n1")
    assert first is not None and [p["metadata"]["name"] for p, _ in first.static] == ["a"]
    assert s.persistent_volumes["a"]["spec"]["claimRef"]["name"] == "c"
    assert s.api_volume(PV, "a") == pv("a")  # the API's object is still known
    second = PodView.from_dict(pod_with("d"))
    check = vb.VolumeBinding().prefilter(second, s)
    info = s.node("n1")
    assert callable(check) and info is not None
    verdict = check(info)
    assert verdict is not None and verdict.reasons == BIND_CONFLICT
    binder.unreserve(first)
    assert s.persistent_volumes["a"] == pv("a")
    again = vb.VolumeBinding().prefilter(second, s)
    assert callable(again) and again(info) is None


def test_reserve_annotates_claims_to_provision():
    s = snap([], [pvc("c", cls="dyn")], [sc("dyn", "example.com/csi")])
    binder = VolumeBinder(kube=None, snapshot=s)  # type: ignore[arg-type]
    res = binder.reserve(pod_with("c"), "n2")
    assert res is not None and not res.static
    assert s.persistent_volume_claims["default/c"]["metadata"]["annotations"] == {
        vb.ANN_SELECTED_NODE: "n2"}
    assert s.is_volume_assumed(PVC, "default/c")


def test_assumed_volume_survives_older_watch_events_not_newer_ones():
    s = snap([pv("a", rv="10")], [pvc("c")])
    taken, _ = vb.bind_volume_to_claim(pv("a", rv="10"), pvc("c"))
    s.assume_volume(PV, taken)
    s.upsert(PV, pv("a", rv="10"))  # a resync of the version it was read at: ignored
    assert s.persistent_volumes["a"] is taken
    s.upsert(PV, pv("a", rv="11"))  # anything newer from the API server wins
    assert s.persistent_volumes["a"]["metadata"]["resourceVersion"] == "11"
    assert not s.is_volume_assumed(PV, "a")
    s.restore_volume(PV, "a")  # nothing assumed any more: a no-op
    assert s.persistent_volumes["a"]["metadata"]["resourceVersion"] == "11"
    with pytest.raises(ValueError, match="out of sync"):
        s.assume_volume(PV, pv("a", rv="3"))


def test_all_bound_pod_reserves_nothing():
    s = snap([pv("a", phase="Bound")], [pvc("c", volume="a", annotations=BOUND)])
    binder = VolumeBinder(kube=None, snapshot=s)  # type: ignore[arg-type]
    assert binder.reserve(pod_with("c"), "n1") is None


def test_a_read_write_once_pod_claim_in_use_rejects_every_node() -> None:
    """volumerestrictions/volume_restrictions.go: a ReadWriteOncePod claim another placed pod
    uses makes the pod Unschedulable on every node (preemption may free it); a claim that
    does not exist is UnschedulableAndUnresolvable at PreFilter."""
    from berthmaster.scheduler.engine import Engine


    claim = {"kind": "PersistentVolumeClaim",
             "metadata": {"name": "solo", "namespace": "default",
                          "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
             "spec": {"accessModes": ["ReadWriteOncePod"], "volumeName": "pv",
                      "resources": {"requests": {"storage": "1Gi"}}}}
    volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "solo"}}]
    holder = make_pod("holder", node_name="a", spec={"volumes": volume})
    pod = make_pod("p", spec={"volumes": volume})
    pv = {"kind": "PersistentVolume", "metadata": {"name": "pv"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOncePod"],
                   "claimRef": {"namespace": "default", "name": "solo"}}}
    snapshot = Snapshot.build(nodes=[make_node("a"), make_node("b")], pods=[holder],
                              persistent_volume_claims=[claim], persistent_volumes=[pv])
    decision = Engine(seed=0).schedule(pod, snapshot)
    assert decision.message == (
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod.")
    assert not decision.unresolvable
    missing = make_pod("q", spec={"volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "gone"}}]})
    assert Engine(seed=0).schedule(missing, snapshot).message == \
        '0/2 nodes are available: persistentvolumeclaim "gone" not found.'
