"""Volumes placed by berthmaster on real kubelets: a StatefulSet's claims provisioned by kind's
default provisioner, data that outlives its pod, a static local volume, an impossible claim.

berthmaster's VolumeBinding follows kube-scheduler 1.35 (pkg/scheduler/framework/plugins/
volumebinding/volume_binding.go and binder.go of k8s.io/kubernetes v1.35.4): Filter keeps the
nodes where every claim is bound to a volume the node may use, can be matched to a free static
volume, or can be provisioned; Reserve/PreBind write a static volume's ``claimRef`` or, for a
WaitForFirstConsumer claim, ``volume.kubernetes.io/selected-node``, then wait for the PV
controller. On the real-kubelet cluster the class ``standard`` is rancher's
local-path-provisioner as on kind (berthmaster/tooling/devcluster/local_path.py); its helper pods
run
on the claim's selected node, so the pods with such claims are kept on the real node(s) — a
kwok node has no disk.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from berthmaster.tooling.devcluster.kubelet import NODE_LABEL, NODE_LABEL_VALUE
from e2e.conftest import IMAGE, MODE, SCHEDULER, Kind, wait_for
from e2e.test_scheduling import events

SELECTED_NODE = "volume.kubernetes.io/selected-node"
HOSTNAME = "kubernetes.io/hostname"
# berthmaster's scheduler sends User-Agent berthmaster-scheduler/<version>
# (berthmaster/foundation/kube.py):
# the API server names the manager of the fields it writes after it.
SCHEDULER_MANAGER = "berthmaster-scheduler"
# The pods' program: write who wrote the volume first (the first pod's uid), then idle.
WRITER = ('[ -f /data/first ] || echo "$POD_UID" > /data/first; '
          "exec sleep 86400")


def real_nodes() -> dict[str, str]:
    """The nodeSelector keeping a pod on nodes that run containers: the real kubelet beside
    the kwok nodes; on kind every node is real."""
    return {NODE_LABEL: NODE_LABEL_VALUE} if MODE == "kubelet" else {}


def stateful_set(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "schedulerName": SCHEDULER, "nodeSelector": real_nodes(),
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "writer", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                        "command": ["/bin/sh", "-c", WRITER],
                        "env": [{"name": "POD_UID", "valueFrom": {
                            "fieldRef": {"fieldPath": "metadata.uid"}}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                         "resources": {"requests": {"storage": "64Mi"}}},
            }],
        },
    }


def ready_pods(kind: Kind, namespace: str, app: str) -> list[dict[str, Any]]:
    pods = kind.items("pods", "-n", namespace, "-l", f"app={app}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in p["status"].get("conditions") or [])]


def wait_ready(kind: Kind, namespace: str, app: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        pods = ready_pods(kind, namespace, app)
        return pods if len(pods) == count else None

    return wait_for(ready, f"{count} Ready pods of {namespace}/{app}", timeout=240)


def volume_node(volume: dict[str, Any]) -> str:
    """The one node a local volume's required node affinity names."""
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (HOSTNAME, "In"), expression
    (node,) = expression["values"]
    return str(node)


def annotation_managers(claim: dict[str, Any], key: str) -> set[str]:
    """The field managers owning annotation ``key`` of an object."""
    return {entry["manager"] for entry in claim["metadata"].get("managedFields") or []
            if f"f:{key}" in ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get(
                "f:annotations", {})}


def read_first(kind: Kind, namespace: str, pod: str) -> str:
    return kind.run("exec", "-n", namespace, pod, "-c", "writer", "--", "cat",
                    "/data/first").stdout.strip()


def scheduled_events(kind: Kind, namespace: str, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The Scheduled events of this very pod (a recreated pod has the same name)."""
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    return wait_for(lambda: [e for e in events(kind, namespace, name, "Scheduled")
                             if e["involvedObject"]["uid"] == uid],
                    f"a Scheduled event for {namespace}/{name} ({uid})")


@pytest.fixture
def cluster_scoped(kind: Kind) -> Iterator[list[str]]:
    """Cluster-scoped objects a test creates (``kind/name``), deleted after it."""
    made: list[str] = []
    yield made
    for ref in reversed(made):
        kind.run("delete", ref, "--ignore-not-found", "--wait=false", check=False)


def test_stateful_set_claims_are_provisioned_on_the_nodes_berthmaster_chose(
        kind: Kind, namespace: str) -> None:
    """A StatefulSet's volumeClaimTemplates with WaitForFirstConsumer class ``standard``: each
    claim waits for its pod, berthmaster picks the node and writes the claim's selected-node
    (volumebinding/binder.go, AssumePodVolumes and BindPodVolumes), the provisioner makes the
    volume there, the PV controller binds it, and the pods turn Ready on the nodes their
    volumes' node affinity names."""
    kind.apply(yaml.safe_dump(stateful_set("web", 3)), namespace)
    pods = wait_ready(kind, namespace, "web", 3)
    assert sorted(p["metadata"]["name"] for p in pods) == ["web-0", "web-1", "web-2"]
    for pod in pods:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        claim = kind.get("pvc", f"data-{name}", "-n", namespace, "--show-managed-fields")
        assert claim["status"]["phase"] == "Bound", claim["status"]
        volume = kind.get("pv", claim["spec"]["volumeName"])
        assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        assert volume_node(volume) == node
        assert claim["metadata"]["annotations"][SELECTED_NODE] == node
        assert SCHEDULER_MANAGER in annotation_managers(claim, SELECTED_NODE), (
            claim["metadata"].get("managedFields"))
        if MODE == "kubelet":
            assert kind.get("node", node)["metadata"]["labels"].get(NODE_LABEL) == (
                NODE_LABEL_VALUE)
        (scheduled,) = scheduled_events(kind, namespace, pod)
        assert scheduled["source"]["component"] == SCHEDULER


def test_data_outlives_the_pod_and_its_replacement_lands_on_the_volume_node(
        kind: Kind, namespace: str) -> None:
    """Deleting a StatefulSet's pod keeps its claim; the controller recreates the pod, whose
    bound claim's volume is usable only where its node affinity points (VolumeBinding's Filter,
    volumebinding/binder.go checkBoundClaims), so berthmaster places it there and the file the
    first pod wrote is read back by the second."""
    kind.apply(yaml.safe_dump(stateful_set("keep", 1)), namespace)
    (first,) = wait_ready(kind, namespace, "keep", 1)
    first_uid = first["metadata"]["uid"]
    assert wait_for(lambda: read_first(kind, namespace, "keep-0"),
                    "keep-0 to write /data/first") == first_uid
    claim = kind.get("pvc", "data-keep-0", "-n", namespace)
    node = volume_node(kind.get("pv", claim["spec"]["volumeName"]))

    kind.run("delete", "pod", "keep-0", "-n", namespace, "--wait=false")

    def replaced() -> list[dict[str, Any]] | None:
        pods = ready_pods(kind, namespace, "keep")
        return pods if pods and pods[0]["metadata"]["uid"] != first_uid else None

    (second,) = wait_for(replaced, "keep-0 recreated and Ready", timeout=240)
    assert second["spec"]["nodeName"] == node
    assert kind.get("pvc", "data-keep-0", "-n", namespace)["spec"]["volumeName"] == (
        claim["spec"]["volumeName"])
    (scheduled,) = scheduled_events(kind, namespace, second)
    assert scheduled["source"]["component"] == SCHEDULER
    assert scheduled["message"] == f"Successfully assigned {namespace}/keep-0 to {node}"
    assert read_first(kind, namespace, "keep-0") == first_uid


def schedulable_worker(kind: Kind) -> str:
    """A node without taints or cordon that is not the real kubelet (a kwok node here; on
    kind, a worker): a local volume there must draw the pod to it."""
    for node in kind.items("nodes"):
        labels = node["metadata"]["labels"]
        if (not node["spec"].get("taints") and not node["spec"].get("unschedulable")
                and labels.get(NODE_LABEL) != NODE_LABEL_VALUE
                and "node-role.kubernetes.io/control-plane" not in labels):
            return str(node["metadata"]["name"])
    raise AssertionError("no untainted worker node in the cluster")


def no_provisioner_class(name: str) -> dict[str, Any]:
    """A class for pre-made local volumes (kubernetes.io/no-provisioner, as in the
    Kubernetes documentation's local volume example), bound when a pod is placed."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain"}


def claim_pod(name: str, claim: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": SCHEDULER, **spec,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                     "volumes": [{"name": "v",
                                  "persistentVolumeClaim": {"claimName": claim}}]}}


def claim(name: str, class_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class_name,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def test_a_static_local_volume_draws_its_pod_to_its_node(
        kind: Kind, namespace: str, cluster_scoped: list[str]) -> None:
    """A WaitForFirstConsumer claim with one matching local volume whose required node affinity
    names one node: every other node fails VolumeBinding's Filter (volumebinding/binder.go
    FindPodVolumes: no volume for the claim there), so the pod goes to that node, and PreBind
    writes the volume's claimRef for the PV controller to complete the binding; no
    selected-node is written (nothing is provisioned)."""
    target = schedulable_worker(kind)
    class_name, volume_name = f"local-{namespace}", f"local-{namespace}"
    kind.apply(yaml.safe_dump(no_provisioner_class(class_name)))
    cluster_scoped.append(f"storageclass/{class_name}")
    kind.apply(yaml.safe_dump({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume_name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": class_name,
                 "local": {"path": "/mnt/disks/one"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": HOSTNAME, "operator": "In", "values": [target]}]}]}}}}))
    cluster_scoped.append(f"pv/{volume_name}")
    kind.apply(yaml.safe_dump(claim("local", class_name)), namespace)
    pod = claim_pod("drawn", "local", tolerations=[{"operator": "Exists"}])
    kind.apply(yaml.safe_dump(pod), namespace)

    def bound() -> str | None:
        return kind.get("pod", "drawn", "-n", namespace)["spec"].get("nodeName") or None

    assert wait_for(bound, "pod drawn bound") == target
    claimed = wait_for(lambda: (lambda c: c if c["status"].get("phase") == "Bound" else None)(
        kind.get("pvc", "local", "-n", namespace)), "claim local Bound")
    assert claimed["spec"]["volumeName"] == volume_name
    assert SELECTED_NODE not in (claimed["metadata"].get("annotations") or {})
    volume = kind.get("pv", volume_name, "--show-managed-fields")
    assert volume["spec"]["claimRef"]["uid"] == claimed["metadata"]["uid"]
    assert SCHEDULER_MANAGER in {e["manager"] for e in volume["metadata"]["managedFields"]
                                 if "f:claimRef" in (e.get("fieldsV1") or {}).get("f:spec", {})}


FIT_ERROR = re.compile(r"0/(\d+) nodes are available: ")


def test_a_claim_no_node_can_satisfy_leaves_the_pod_pending_with_upstreams_reason(
        kind: Kind, namespace: str, cluster_scoped: list[str]) -> None:
    """A WaitForFirstConsumer claim of a class that provisions nothing, with no volume: every
    node fails VolumeBinding's Filter with ErrReasonBindConflict, unresolvable (volumebinding/
    binder.go), and no PostFilter can help. The message is FitError.Error's
    (pkg/scheduler/framework/types.go) followed by the PostFilter plugins' reasons joined with
    ", " in the default order (framework/runtime/framework.go RunPostFilterPlugins):
    DynamicResources' "no new claims to deallocate" (plugins/dynamicresources/
    dynamicresources.go), then DefaultPreemption's FitError (framework/preemption/
    preemption.go). The pod tolerates every taint so each node reaches VolumeBinding
    (TaintToleration and NodeUnschedulable run first)."""
    class_name = f"nothing-{namespace}"
    kind.apply(yaml.safe_dump(no_provisioner_class(class_name)))
    cluster_scoped.append(f"storageclass/{class_name}")
    kind.apply(yaml.safe_dump(claim("unmet", class_name)), namespace)
    counts = {len(kind.items("nodes"))}
    name = f"stuck-{uuid.uuid4().hex[:4]}"
    kind.apply(yaml.safe_dump(claim_pod(name, "unmet", tolerations=[{"operator": "Exists"}])),
               namespace)
    (failed, *_) = wait_for(lambda: events(kind, namespace, name, "FailedScheduling"),
                            f"a FailedScheduling event for {name}")
    counts.add(len(kind.items("nodes")))
    found = FIT_ERROR.match(failed["message"])
    assert found, failed["message"]
    total = int(found.group(1))
    assert total in counts, (total, counts)
    assert failed["message"] == (
        f"0/{total} nodes are available: {total} node(s) didn't find available persistent "
        f"volumes to bind. no new claims to deallocate, preemption: 0/{total} nodes are "
        f"available: {total} Preemption is not helpful for scheduling.")
    assert failed["source"]["component"] == SCHEDULER
    pod = kind.get("pod", name, "-n", namespace)
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == failed["message"]
    assert kind.get("pvc", "unmet", "-n", namespace)["status"]["phase"] == "Pending"
