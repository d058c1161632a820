"""Trimming cached Pods and Nodes to what placement reads changes nothing placement sees.

kube-scheduler drops ``metadata.managedFields`` from every pod its informer caches
(pkg/scheduler/scheduler.go, newPodInformer's transform); berthmaster's informers also drop the
fields no part of the scheduler reads (scheduler/daemon/trim.py). Each case takes a full
object, as the API server sends it, and checks that the views the engine reads, the cache's
"did placement data change" test, the queue's "did the spec change" test and the node-update
hints all come out the same for the trimmed object, and that it is smaller.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from berthmaster.scheduler.daemon.hints import node_change
from berthmaster.scheduler.daemon.queue import _spec_changed
from berthmaster.scheduler.daemon.trim import trim_node, trim_pod
from berthmaster.scheduler.model import NodeView, PodView
from berthmaster.scheduler.snapshot import PREFER_AVOID_PODS_ANNOTATION, placement_view
from tests.support.builders import make_node, make_pod, match_expression, pod_affinity_term

JSON = dict[str, Any]
MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}}]


def as_served(pod: JSON) -> JSON:
    """``pod`` with what the API server and the kubelet add: managedFields, an annotation, the
    service-account volume and mount, container defaults, status churn."""
    pod = copy.deepcopy(pod)
    meta = pod["metadata"]
    meta.update(resourceVersion="7", managedFields=MANAGED,
                creationTimestamp="2026-01-01T00:00:00Z",
                annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}" * 50})
    spec = pod["spec"]
    for c in spec["containers"]:
        c.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log",
                 env=[{"name": "A", "value": "b"}], volumeMounts=[
                     {"name": "kube-api-access", "mountPath": "/var/run/secrets"}])
    spec.setdefault("volumes", []).append({"name": "kube-api-access", "projected": {
        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}})
    spec.update(dnsPolicy="ClusterFirst", restartPolicy="Always", securityContext={},
                serviceAccountName="default", enableServiceLinks=True)
    pod["status"].update(conditions=[{"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2026-01-01T00:00:01Z"}],
                         hostIP="10.0.0.1", podIP="10.244.0.9", podIPs=[{"ip": "10.244.0.9"}],
                         qosClass="Burstable", containerStatuses=[{"name": "app", "ready": True}])
    return pod


PODS = [
    make_pod("plain", cpu="100m", memory="128Mi"),
    make_pod("bound", cpu="1", node_name="n1", labels={"app": "web"},
             created="2026-01-01T00:00:00Z"),
    make_pod("ports", host_ports=[80, 443], tolerations=[{"key": "k", "operator": "Exists"}]),
    make_pod("affine", labels={"app": "db"}, node_selector={"disk": "ssd"},
             required_node_terms=[[match_expression("zone", "In", "a", "b")]],
             preferred_node_terms=[(5, [match_expression("gpu", "Exists")])],
             pod_affinity=[pod_affinity_term({"app": "web"}, "zone")],
             pod_anti_affinity=[pod_affinity_term({"app": "db"})],
             preferred_pod_affinity=[(3, pod_affinity_term({"app": "cache"}))],
             spread=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                      "labelSelector": {"matchLabels": {"app": "db"}}, "matchLabelKeys": ["app"]}]),
    make_pod("claims", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                                {"name": "cfg", "configMap": {"name": "x"}},
                                {"name": "disk", "gcePersistentDisk": {"pdName": "pd1"}}]),
    make_pod("ranked", priority=100, priority_class="high", preemption_policy="Never",
             scheduler_name="berthmaster", owner=("ReplicaSet", "rs", "rs-uid"), phase="Pending",
             spec={"initContainers": [{"name": "init", "image": "i", "restartPolicy": "Always",
                                       "resources": {"requests": {"cpu": "50m"}},
                                       "command": ["sleep"]}],
                   "overhead": {"cpu": "10m"}, "schedulingGates": [{"name": "g"}]}),
]


def view_fields(view: Any) -> dict[str, Any]:
    return {slot: getattr(view, slot) for slot in type(view).__slots__
            if slot not in ("raw", "__weakref__")}


@pytest.mark.parametrize("pod", PODS, ids=lambda p: p["metadata"]["name"])
def test_trimmed_pod_reads_the_same(pod: JSON) -> None:
    full = as_served(pod)
    trimmed = trim_pod(copy.deepcopy(full))
    assert view_fields(PodView._build(trimmed)) == view_fields(PodView._build(full))
    assert len(json.dumps(trimmed)) < len(json.dumps(full))
    assert "managedFields" not in trimmed["metadata"]
    # status churn: ignored by the cache before and after trimming alike
    churned = copy.deepcopy(full)
    churned["status"]["podIP"] = "10.244.0.10"
    assert placement_view(trim_pod(copy.deepcopy(churned))) == placement_view(trimmed)
    # a relabel is a spec change to the queue, trimmed or not; an annotation is not
    relabelled = copy.deepcopy(full)
    relabelled["metadata"].setdefault("labels", {})["new"] = "x"
    assert _spec_changed(trimmed, trim_pod(copy.deepcopy(relabelled)))
    annotated = copy.deepcopy(full)
    annotated["metadata"]["annotations"]["note"] = "y"
    assert _spec_changed(full, annotated) is _spec_changed(trimmed, trim_pod(annotated)) is False


def served_node(name: str, **kwargs: Any) -> JSON:
    node = make_node(name, **kwargs)
    node["metadata"].update(resourceVersion="3", managedFields=MANAGED, annotations={
        "node.alpha.kubernetes.io/ttl": "0", **node["metadata"].get("annotations", {})})
    node["spec"].update(podCIDR="10.244.1.0/24", providerID="kwok://n")
    node["status"].update(addresses=[{"type": "InternalIP", "address": "10.0.0.2"}],
                          nodeInfo={"kubeletVersion": "v1.35.4"}, daemonEndpoints={})
    for condition in node["status"]["conditions"]:
        condition.update(lastHeartbeatTime="2026-01-01T00:00:00Z", reason="KubeletReady",
                         message="kubelet is posting ready status")
    return node


NODES = [
    served_node("n1", labels={"zone": "a"}),
    served_node("n2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                unschedulable=True, conditions={"MemoryPressure": "True"},
                images={"registry/app:1": 1000}, extended={"example.com/gpu": 2},
                annotations={PREFER_AVOID_PODS_ANNOTATION: '{"preferAvoidPods": []}'}),
]


@pytest.mark.parametrize("node", NODES, ids=lambda n: n["metadata"]["name"])
def test_trimmed_node_reads_the_same(node: JSON) -> None:
    trimmed = trim_node(copy.deepcopy(node))
    got, want = view_fields(NodeView.from_dict(trimmed)), view_fields(NodeView.from_dict(node))
    # of the annotations, placement reads preferAvoidPods alone (snapshot, NodePreferAvoidPods)
    assert got.pop("annotations").get(PREFER_AVOID_PODS_ANNOTATION) == \
        want.pop("annotations").get(PREFER_AVOID_PODS_ANNOTATION)
    assert got == want
    assert len(json.dumps(trimmed)) < len(json.dumps(node))
    # a heartbeat changes nothing; a condition's status, a label or a taint does, as before
    beat = copy.deepcopy(node)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    assert node_change(node, beat) == node_change(trimmed, trim_node(copy.deepcopy(beat))) \
        == frozenset()
    changed = copy.deepcopy(beat)
    changed["status"]["conditions"][0]["status"] = "False"
    changed["metadata"]["labels"]["new"] = "x"
    changed["spec"]["taints"] = [{"key": "t", "effect": "NoExecute"}]
    assert node_change(node, changed) == node_change(trimmed, trim_node(changed)) \
        == {"conditions", "labels", "taints"}


def test_capacity_is_kept_when_allocatable_is_missing() -> None:
    node = served_node("n3", cpu="8")
    del node["status"]["allocatable"]
    trimmed = trim_node(copy.deepcopy(node))
    assert NodeView.from_dict(trimmed).allocatable == NodeView.from_dict(node).allocatable


def test_informers_trim_what_they_list_and_watch() -> None:
    from berthmaster.scheduler.daemon.cache import RESOURCES, Informer

    full = as_served(PODS[1])

    class Kube:
        async def request(self, method: str, path: str, params: Any) -> JSON:
            # two pages: the informer trims each as it comes
            if params.get("continue"):
                return {"items": [copy.deepcopy(full)], "metadata": {"resourceVersion": "5"}}
            return {"items": [copy.deepcopy(full)], "metadata": {"continue": "next"}}

        async def watch(self, path: str, version: str, **params: Any) -> Any:
            yield {"type": "MODIFIED", "object": copy.deepcopy(full)}

    seen: list[JSON] = []
    pods = next(r for r in RESOURCES if r.kind == "Pod")
    informer = Informer(Kube(), pods, lambda kind, event, obj, old: seen.append(obj))  # type: ignore[arg-type]
    listed = asyncio.run(informer.list_objects())
    assert listed == [trim_pod(copy.deepcopy(full))] * 2 and informer.version == "5"
    asyncio.run(informer._watch())
    assert seen == [trim_pod(copy.deepcopy(full))]


def test_a_resized_pod_with_pod_level_resources_reads_the_same_trimmed() -> None:
    """The trim keeps what a bound pod's requests read (scheduler/pod_resources.py, after
    k8s.io/component-helpers resource/helpers.go PodRequests): spec.resources, each container
    status's resources and allocatedResources, the PodResizePending condition."""
    full = as_served(make_pod("resized", cpu="500m", node_name="n1",
                              spec={"resources": {"requests": {"memory": "1Gi"}}}))
    full["status"]["containerStatuses"] = [{
        "name": "app", "ready": True, "restartCount": 0, "image": "registry.example/app:1",
        "resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "2"},
        "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}]
    full["status"]["conditions"].append(
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible",
         "message": "Node didn't have enough capacity", "lastTransitionTime": "t"})
    trimmed = trim_pod(copy.deepcopy(full))
    assert view_fields(PodView._build(trimmed)) == view_fields(PodView._build(full))
    assert PodView._build(trimmed).requests == {"cpu": 2000, "memory": 2**30}
    assert trimmed["status"]["containerStatuses"] == [{
        "name": "app", "resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "2"}}]
    assert trimmed["status"]["conditions"] == [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
