"""Every predicate, table-driven: one pod, one node (plus the pods already there)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import registry
from berthmaster.scheduler.plugins.base import Predicate, Status
from berthmaster.scheduler.plugins.node_label import LabelsPresence
from berthmaster.scheduler.plugins.service_affinity import ServiceAffinity
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import (
    make_node,
    make_pod,
    match_expression,
    pod_affinity_term,
    taint,
    toleration,
)

AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"
# kube-scheduler 1.35 names no taint in events (tainttoleration/taint_toleration.go, Filter);
# which taint it was is the status's detail, shown by simulate --explain
TAINT = "node(s) had untolerated taint(s)"
ZONE = "topology.kubernetes.io/zone"


def verdict(predicate: Predicate, pod: dict[str, Any], node: dict[str, Any],
            existing: list[dict[str, Any]] = (), nodes: list[dict[str, Any]] = (),
            **objects: Any) -> tuple[str, ...] | None:
    """None when the pod fits ``node``, else the rejection reasons."""
    snap = Snapshot.build(nodes=[node, *nodes], pods=existing, **objects)
    result = predicate.prefilter(PodView.from_dict(pod), snap)
    if result is None:
        return None
    if isinstance(result, Status):
        return result.reasons
    status = result(snap.node(node["metadata"]["name"]))
    return None if status is None else status.reasons


def P(name: str, **args: Any) -> Predicate:
    return registry.PREDICATES[name](**args)


CASES = [
    # (id, predicate, pod, node, existing pods, expected reasons or None)
    ("resources fit", P("PodFitsResources"), make_pod(cpu="1"), make_node("n", cpu="2"), [], None),
    ("cpu short", P("PodFitsResources"), make_pod(cpu="2"), make_node("n", cpu="2"),
     [make_pod("o", cpu="500m", node_name="n")], ("Insufficient cpu",)),
    ("cpu and memory short", P("PodFitsResources"), make_pod(cpu="3", memory="9Gi"),
     make_node("n", cpu="2"), [], ("Insufficient cpu", "Insufficient memory")),
    ("extended resource missing", P("NodeResourcesFit"),
     make_pod(requests={"example.com/gpu": "1"}), make_node("n"), [],
     ("Insufficient example.com/gpu",)),
    ("extended resource present", P("PodFitsResources"),
     make_pod(requests={"example.com/gpu": "2"}), make_node("n", extended={"example.com/gpu": 2}),
     [], None),
    ("too many pods", P("PodFitsResources"), make_pod(), make_node("n", pods=1),
     [make_pod("o", node_name="n")], ("Too many pods",)),
    ("terminal pods use nothing", P("PodFitsResources"), make_pod(cpu="2"), make_node("n", cpu="2"),
     [make_pod("o", cpu="2", node_name="n", phase="Succeeded")], None),
    ("host port free", P("PodFitsHostPorts"), make_pod(host_ports=[80]), make_node("n"),
     [make_pod("o", host_ports=[81], node_name="n")], None),
    ("host port taken", P("PodFitsPorts"), make_pod(host_ports=[80]), make_node("n"),
     [make_pod("o", host_ports=[80], node_name="n")], (PORTS,)),
    ("host name match", P("HostName"), make_pod(spec={"nodeName": "n"}), make_node("n"), [], None),
    ("host name mismatch", P("HostName"), make_pod(spec={"nodeName": "m"}), make_node("n"), [],
     ("node(s) didn't match the requested node name",)),
    ("node selector match", P("MatchNodeSelector"), make_pod(node_selector={"disk": "ssd"}),
     make_node("n", labels={"disk": "ssd"}), [], None),
    ("node selector mismatch", P("MatchNodeSelector"), make_pod(node_selector={"disk": "ssd"}),
     make_node("n", labels={"disk": "hdd"}), [], (AFFINITY,)),
    # required node affinity zone In [us] (deploy/samples/pods-*.yaml)
    ("node affinity matching labels", P("NodeAffinity"),
     make_pod("pod-s1", required_node_terms=[[match_expression("zone", "In", "us")]]),
     make_node("node1", labels={"zone": "us"}), [], None),
    ("node affinity no matching labels", P("NodeAffinity"),
     make_pod("pod-s1", required_node_terms=[[match_expression("zone", "In", "us")]]),
     make_node("node1", labels={"zone": "emea"}), [], (AFFINITY,)),
    ("node affinity NotIn (not indexable)", P("MatchNodeSelector"),
     make_pod(required_node_terms=[[match_expression("zone", "NotIn", "us")]]),
     make_node("n", labels={"zone": "emea"}), [], None),
    ("selector and affinity both required", P("MatchNodeSelector"),
     make_pod(node_selector={"disk": "ssd"},
              required_node_terms=[[match_expression("zone", "In", "us")]]),
     make_node("n", labels={"zone": "us"}), [], (AFFINITY,)),
    # kube-scheduler 1.35 runs NodeName, NodeAffinity, NodePorts, NodeResourcesFit in turn and
    # stops at the first that fails (apis/config/v1/default_plugins.go, getDefaultPlugins)
    ("general stops at node affinity", P("GeneralPredicates"),
     make_pod(cpu="8", host_ports=[80], node_selector={"a": "b"}), make_node("n", cpu="1"),
     [make_pod("o", host_ports=[80], node_name="n")], (AFFINITY,)),
    ("general: ports before resources", P("GeneralPredicates"),
     make_pod(cpu="8", host_ports=[80]), make_node("n", cpu="1"),
     [make_pod("o", host_ports=[80], node_name="n")], (PORTS,)),
    ("general: every short resource", P("GeneralPredicates"),
     make_pod(cpu="8", memory="64Gi"), make_node("n", cpu="1"), [],
     ("Insufficient cpu", "Insufficient memory")),
    ("taint untolerated", P("PodToleratesNodeTaints"), make_pod(),
     make_node("n", taints=[taint("dedicated", "groupName")]), [],
     (TAINT,)),
    ("taint tolerated", P("TaintToleration"),
     make_pod(tolerations=[toleration("dedicated", "groupName", "NoSchedule", "Equal")]),
     make_node("n", taints=[taint("dedicated", "groupName")]), [], None),
    ("PreferNoSchedule never rejects", P("PodToleratesNodeTaints"), make_pod(),
     make_node("n", taints=[taint("disktype", "ssd", "PreferNoSchedule")]), [], None),
    ("empty taint value printed as upstream", P("PodToleratesNodeTaints"), make_pod(),
     make_node("n", taints=[taint("node-role.kubernetes.io/master")]), [],
     (TAINT,)),
    ("documented three-taint example", P("PodToleratesNodeTaints"),
     make_pod(tolerations=[toleration("key1", "value1", "NoSchedule", "Equal"),
                           toleration("key1", "value1", "NoExecute", "Equal")]),
     make_node("node1", taints=[taint("key1", "value1", "NoSchedule"),
                                taint("key1", "value1", "NoExecute"),
                                taint("key2", "value2", "NoSchedule")]), [],
     (TAINT,)),
    ("NoExecute-only predicate ignores NoSchedule", P("PodToleratesNodeNoExecuteTaints"),
     make_pod(), make_node("n", taints=[taint("a", "b", "NoSchedule")]), [], None),
    ("NoExecute-only predicate", P("PodToleratesNodeNoExecuteTaints"), make_pod(),
     make_node("n", taints=[taint("a", "b", "NoExecute")]), [],
     (TAINT,)),
    ("cordoned node", P("CheckNodeUnschedulable"), make_pod(), make_node("n", unschedulable=True),
     [], ("node(s) were unschedulable",)),
    ("cordoned node, tolerating pod", P("NodeUnschedulable"),
     make_pod(tolerations=[toleration("node.kubernetes.io/unschedulable", operator="Exists",
                                      effect="NoSchedule")]),
     make_node("n", unschedulable=True), [], None),
    ("node not ready", P("CheckNodeCondition"), make_pod(), make_node("n", ready=False), [],
     ("node(s) were not ready",)),
    ("network unavailable", P("CheckNodeCondition"), make_pod(),
     make_node("n", conditions={"NetworkUnavailable": "True"}), [],
     ("node(s) had unavailable network",)),
    ("memory pressure, best-effort pod", P("CheckNodeMemoryPressure"), make_pod(),
     make_node("n", conditions={"MemoryPressure": "True"}), [], ("node(s) had memory pressure",)),
    ("memory pressure, burstable pod", P("CheckNodeMemoryPressure"), make_pod(cpu="1"),
     make_node("n", conditions={"MemoryPressure": "True"}), [], None),
    # pod-level resources decide the QoS class (pkg/apis/core/v1/helper/qos/qos.go)
    ("memory pressure, pod-level requests only", P("CheckNodeMemoryPressure"),
     make_pod(spec={"resources": {"requests": {"memory": "1Gi"}}}),
     make_node("n", conditions={"MemoryPressure": "True"}), [], None),
    ("disk pressure", P("CheckNodeDiskPressure"), make_pod(cpu="1"),
     make_node("n", conditions={"DiskPressure": "True"}), [], ("node(s) had disk pressure",)),
    ("labelsPresence true, all present", LabelsPresence(labels=["rack", "region"], presence=True),
     make_pod(), make_node("n", labels={"rack": "r1", "region": "eu"}), [], None),
    ("labelsPresence true, one missing", LabelsPresence(labels=["rack", "region"], presence=True),
     make_pod(), make_node("n", labels={"rack": "r1"}), [],
     ("node(s) didn't have the requested labels",)),
    ("labelsPresence false, one present", LabelsPresence(labels=["building"], presence=False),
     make_pod(), make_node("n", labels={"building": "b1"}), [],
     ("node(s) didn't have the requested labels",)),
    ("labelsPresence false, absent", LabelsPresence(labels=["building"], presence=False),
     make_pod(), make_node("n"), [], None),
    ("gce pd shared read-write", P("NoDiskConflict"),
     make_pod(volumes=[{"name": "v", "gcePersistentDisk": {"pdName": "d"}}]), make_node("n"),
     [make_pod("o", node_name="n", volumes=[{"name": "v", "gcePersistentDisk": {"pdName": "d"}}])],
     ("node(s) had no available disk",)),
    ("gce pd shared read-only", P("VolumeRestrictions"),
     make_pod(volumes=[{"name": "v", "gcePersistentDisk": {"pdName": "d", "readOnly": True}}]),
     make_node("n"),
     [make_pod("o", node_name="n", volumes=[{"name": "v", "gcePersistentDisk": {
         "pdName": "d", "readOnly": True}}])], None),
    ("ebs never shared", P("NoDiskConflict"),
     make_pod(volumes=[{"name": "v", "awsElasticBlockStore": {"volumeID": "x", "readOnly": True}}]),
     make_node("n"),
     [make_pod("o", node_name="n", volumes=[{"name": "v", "awsElasticBlockStore": {
         "volumeID": "x", "readOnly": True}}])], ("node(s) had no available disk",)),
    ("ebs volume count", P("MaxEBSVolumeCount"),
     make_pod(volumes=[{"name": "v", "awsElasticBlockStore": {"volumeID": "new"}}]),
     make_node("n", extended={"attachable-volumes-aws-ebs": 1}),
     [make_pod("o", node_name="n", volumes=[{"name": "v", "awsElasticBlockStore": {
         "volumeID": "old"}}])], ("node(s) exceed max volume count",)),
    ("gce volume count within limit", P("MaxGCEPDVolumeCount"),
     make_pod(volumes=[{"name": "v", "gcePersistentDisk": {"pdName": "same"}}]), make_node("n"),
     [make_pod("o", node_name="n", volumes=[{"name": "v", "gcePersistentDisk": {
         "pdName": "same"}}])], None),
]


@pytest.mark.parametrize(("predicate", "pod", "node", "existing", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_predicate(predicate, pod, node, existing, want):
    assert verdict(predicate, pod, node, existing) == want


def _ns(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


IPA = "MatchInterPodAffinity"


@pytest.mark.parametrize(("pod", "node", "existing", "want"), [
    # documented pod affinity example: team4a joins team4's node
    (make_pod("team4a", pod_affinity=[pod_affinity_term({"team": "4"})]), make_node("n1"),
     [make_pod("team4", labels={"team": "4"}, node_name="n1")], None),
    (make_pod("team4a", pod_affinity=[pod_affinity_term({"team": "4"})]), make_node("n2"),
     [make_pod("team4", labels={"team": "4"}, node_name="n1")],
     ("node(s) didn't match pod affinity rules",)),
    # documented anti-affinity example: pod-s2 avoids pod-s1's node
    (make_pod("pod-s2", pod_anti_affinity=[pod_affinity_term(expressions=[
        match_expression("security", "In", "s1")])]), make_node("n1"),
     [make_pod("pod-s1", labels={"security": "s1"}, node_name="n1")],
     ("node(s) didn't match pod anti-affinity rules",)),
    (make_pod("pod-s2", pod_anti_affinity=[pod_affinity_term({"security": "s1"})]),
     make_node("n2"), [make_pod("pod-s1", labels={"security": "s1"}, node_name="n1")], None),
    # documented example: no pod with security=s2 anywhere, pod does not match itself -> pending
    (make_pod("pod-s2", pod_affinity=[pod_affinity_term({"security": "s2"})]), make_node("n1"),
     [make_pod("pod-s1", labels={"security": "s1"}, node_name="n1")],
     ("node(s) didn't match pod affinity rules",)),
    # first-pod exception: nothing matches anywhere but the pod matches its own term
    (make_pod("first", labels={"app": "db"}, pod_affinity=[pod_affinity_term({"app": "db"})]),
     make_node("n1"), [], None),
    # zone topology: same zone, other node
    (make_pod("p", pod_affinity=[pod_affinity_term({"team": "4"}, ZONE)]),
     make_node("n2", labels={ZONE: "a"}),
     [make_pod("t", labels={"team": "4"}, node_name="n1")], None),
    # existing pod's anti-affinity in the other direction
    (make_pod("p", labels={"app": "web"}), make_node("n1"),
     [make_pod("o", node_name="n1", pod_anti_affinity=[pod_affinity_term({"app": "web"})])],
     ("node(s) didn't satisfy existing pods anti-affinity rules",)),
    # other namespace: term defaults to the pod's own namespace
    (make_pod("p", pod_anti_affinity=[pod_affinity_term({"app": "x"})]), make_node("n1"),
     [make_pod("o", "other", labels={"app": "x"}, node_name="n1")], None),
    (make_pod("p", pod_anti_affinity=[pod_affinity_term({"app": "x"}, namespaces=["other"])]),
     make_node("n1"), [make_pod("o", "other", labels={"app": "x"}, node_name="n1")],
     ("node(s) didn't match pod anti-affinity rules",)),
    (make_pod("p", pod_anti_affinity=[pod_affinity_term({"app": "x"},
                                                        namespace_selector={})]),
     make_node("n1"), [make_pod("o", "other", labels={"app": "x"}, node_name="n1")],
     ("node(s) didn't match pod anti-affinity rules",)),
])
def test_inter_pod_affinity(pod, node, existing, want):
    nodes = [make_node("n1", labels={ZONE: "a"}), make_node("n2", labels={ZONE: "a"})]
    others = [n for n in nodes if n["metadata"]["name"] != node["metadata"]["name"]]
    assert verdict(P(IPA), pod, node, existing, nodes=others) == want


def test_namespace_selector_uses_namespace_labels():
    pod = make_pod("p", pod_anti_affinity=[pod_affinity_term(
        {"app": "x"}, namespace_selector={"matchLabels": {"team": "red"}})])
    existing = [make_pod("o", "red-ns", labels={"app": "x"}, node_name="n1")]
    blocked = verdict(P(IPA), pod, make_node("n1"), existing,
                      namespaces=[_ns("red-ns", team="red")])
    free = verdict(P(IPA), pod, make_node("n1"), existing,
                   namespaces=[_ns("red-ns", team="blue")])
    assert blocked == ("node(s) didn't match pod anti-affinity rules",) and free is None


def _svc(name: str, selector: dict[str, str], ns: str = "default") -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": selector}}


@pytest.mark.parametrize(("pod", "node", "want"), [
    # the service's first pod runs in region r1: later pods must follow
    (make_pod("p", labels={"app": "web"}), make_node("n2", labels={"region": "r1"}), None),
    (make_pod("p", labels={"app": "web"}), make_node("n3", labels={"region": "r2"}),
     ("node(s) didn't match service affinity",)),
    # the pod's node selector names the region itself
    (make_pod("p", labels={"app": "web"}, node_selector={"region": "r2"}),
     make_node("n3", labels={"region": "r2"}), None),
    # not in the service: unconstrained
    (make_pod("p", labels={"app": "db"}), make_node("n3", labels={"region": "r2"}), None),
])
def test_service_affinity(pod, node, want):
    nodes = [make_node("n1", labels={"region": "r1"})]
    existing = [make_pod("first", labels={"app": "web"}, node_name="n1")]
    got = verdict(ServiceAffinity(labels=["region"]), pod, node, existing, nodes=nodes,
                  services=[_svc("web", {"app": "web"})])
    assert got == want


def test_service_affinity_first_pod_goes_anywhere():
    got = verdict(ServiceAffinity(labels=["region"]), make_pod("p", labels={"app": "web"}),
                  make_node("n3", labels={"region": "r2"}), services=[_svc("web", {"app": "web"})])
    assert got is None


def _spread(max_skew: int = 1, key: str = ZONE, when: str = "DoNotSchedule",
            **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


@pytest.mark.parametrize(("node", "want"), [
    ("n1", ("node(s) didn't match pod topology spread constraints",)),  # zone a has 2, b has 0
    ("n3", None),
    ("n4", ("node(s) didn't match pod topology spread constraints (missing required label)",)),
])
def test_topology_spread(node, want):
    nodes = [make_node("n1", labels={ZONE: "a"}), make_node("n2", labels={ZONE: "a"}),
             make_node("n3", labels={ZONE: "b"}), make_node("n4")]
    existing = [make_pod("w1", labels={"app": "web"}, node_name="n1"),
                make_pod("w2", labels={"app": "web"}, node_name="n2")]
    target = next(n for n in nodes if n["metadata"]["name"] == node)
    pod = make_pod("p", labels={"app": "web"}, spread=[_spread()])
    got = verdict(P("PodTopologySpread"), pod, target, existing,
                  nodes=[n for n in nodes if n is not target])
    assert got == want


def _pv(name: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], **spec}}


def _pvc(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}, **spec}}


def _bound(pvc: dict[str, Any]) -> dict[str, Any]:
    """A claim the PV controller has bound (upstream's isPVCFullyBound reads the annotation)."""
    pvc["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return pvc


CLAIM = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
PV_AFFINITY = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}


@pytest.mark.parametrize(("predicate", "node", "objects", "want"), [
    ("NoVolumeZoneConflict", make_node("n1", labels={ZONE: "a"}),
     {"persistent_volumes": [_pv("pv", labels={ZONE: "a__b"})],
      "persistent_volume_claims": [_pvc("data", volumeName="pv")]}, None),
    ("NoVolumeZoneConflict", make_node("n1", labels={ZONE: "c"}),
     {"persistent_volumes": [_pv("pv", labels={ZONE: "a__b"})],
      "persistent_volume_claims": [_pvc("data", volumeName="pv")]},
     ("node(s) had no available volume zone",)),
    ("CheckVolumeBinding", make_node("n1"),
     {"persistent_volumes": [_pv("pv", nodeAffinity=PV_AFFINITY)],
      "persistent_volume_claims": [_bound(_pvc("data", volumeName="pv"))]}, None),
    ("CheckVolumeBinding", make_node("n2"),
     {"persistent_volumes": [_pv("pv", nodeAffinity=PV_AFFINITY)],
      "persistent_volume_claims": [_bound(_pvc("data", volumeName="pv"))]},
     ("node(s) didn't match PersistentVolume's node affinity",)),
    ("CheckVolumeBinding", make_node("n1"), {"persistent_volume_claims": [_pvc("data")]},
     ("pod has unbound immediate PersistentVolumeClaims",)),
    ("CheckVolumeBinding", make_node("n1"), {}, ('persistentvolumeclaim "data" not found',)),
    ("CheckVolumeBinding", make_node("n2"),
     {"storage_classes": [{"kind": "StorageClass", "metadata": {"name": "local"},
                           "provisioner": "kubernetes.io/no-provisioner",
                           "volumeBindingMode": "WaitForFirstConsumer"}],
      "persistent_volumes": [_pv("pv", storageClassName="local", nodeAffinity=PV_AFFINITY)],
      "persistent_volume_claims": [_pvc("data", storageClassName="local")]},
     ("node(s) didn't find available persistent volumes to bind",)),
])
def test_volume_predicates(predicate, node, objects, want):
    assert verdict(P(predicate), make_pod("p", volumes=CLAIM), node, **objects) == want


def test_every_registered_predicate_has_a_reason_or_prefilter():
    for name, cls in registry.PREDICATES.items():
        assert cls.NAME, name
        assert name == cls.NAME or name in cls.ALIASES


def test_nominated_pods_reserve_room_for_equal_or_higher_priority():
    """runtime/framework.go, RunFilterPluginsWithNominatedPods: pods nominated to a node with
    the pod's priority or higher count there for every filter; lower ones do not."""
    node = make_node("n", cpu="2")
    nominated = make_pod("winner", cpu="2", priority=100)
    nominated["status"]["nominatedNodeName"] = "n"
    snapshot = Snapshot.build(nodes=[node], pods=[nominated])
    low = make_pod("low", cpu="1", priority=10)
    high = make_pod("high", cpu="1", priority=1000)
    decision = Engine(seed=0).schedule(low, snapshot)
    assert decision.node is None and decision.reasons == {"n": ["Insufficient cpu"]}
    assert Engine(seed=0).schedule(high, snapshot).node == "n"
    assert snapshot.nominated_pods["n"]  # the what-if left the nomination as it was


def test_nominated_pods_count_for_every_filter():
    """Not only resources: a nominated pod's host port is taken for pods of its priority or
    lower; a higher-priority pod may take it."""
    node = make_node("n", cpu="8")
    nominated = make_pod("winner", cpu="1", priority=100, host_ports=[80])
    nominated["status"]["nominatedNodeName"] = "n"
    snapshot = Snapshot.build(nodes=[node], pods=[nominated])
    same = make_pod("same", cpu="1", priority=100, host_ports=[80])
    decision = Engine(seed=0).schedule(same, snapshot)
    assert decision.reasons == {"n": ["node(s) didn't have free ports for the requested pod "
                                      "ports"]}
    assert Engine(seed=0).schedule(make_pod("higher", priority=1000, host_ports=[80]),
                                   snapshot).node == "n"


