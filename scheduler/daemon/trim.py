"""What the scheduler keeps of each Pod and Node it caches: the fields placement reads, no more.

Design: the informers (:mod:`.cache`) hand every listed or watched Pod and Node to
:func:`trim_pod` / :func:`trim_node` before anything stores it, so the informer's ``known``
map, the snapshot's views (``PodView.raw``) and the queue all share one small dict instead of
the API server's whole object. kube-scheduler does the same for pods with an informer
transform that drops ``metadata.managedFields`` (pkg/scheduler/scheduler.go, newPodInformer);
its typed Go structs already leave out whatever the Go types do not declare, whereas a decoded
JSON dict keeps everything, so here the transform also drops what berthmaster never reads:

- Pod: ``managedFields`` and annotations (nothing in the scheduler reads a pod's annotations;
  the queue's "did the spec change" test ignores them, as upstream's isPodUpdated); container
  fields other than name, image, resources, ports and restartPolicy (a sidecar marker); the
  volumes the model cannot use (``model.pod_volume`` returns None: service-account tokens,
  config maps, secrets, emptyDirs); status other than phase, startTime, nominatedNodeName and
  what an in-place resize reports (each container status's name, resources and
  allocatedResources, and the PodResizePending / PodResizeInProgress conditions: the requests
  of a bound pod read them, :func:`berthmaster.scheduler.pod_resources.status_resources`).
- Node: ``managedFields``; annotations other than preferAvoidPods; spec other than taints and
  unschedulable; status other than allocatable (capacity only when allocatable is missing),
  images, and each condition's type and status (the heartbeat times and messages change on
  every kubelet report and are never read).

Everything else (labels, owner references, timestamps, the whole spec of a pod except the
container list) is kept as it came, so a decision made on a trimmed object is the
decision the whole object would get (tests/unit/scheduler_daemon/test_sched_trim.py checks the
views field by field). Both functions trim in place and return the object they were given.
"""

from __future__ import annotations

from typing import Any

from berthmaster.scheduler.model import pod_volume
from berthmaster.scheduler.pod_resources import STATUS_FIELDS, resize_conditions
from berthmaster.scheduler.snapshot import PREFER_AVOID_PODS_ANNOTATION

JSON = dict[str, Any]

CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy")
POD_STATUS_FIELDS = ("phase", "startTime", "nominatedNodeName")
CONTAINER_STATUSES = ("containerStatuses", "initContainerStatuses")
NODE_SPEC_FIELDS = ("taints", "unschedulable")
NODE_STATUS_FIELDS = ("allocatable", "images", "conditions")


def _containers(containers: Any) -> Any:
    if not isinstance(containers, list):
        return containers
    return [{k: c[k] for k in CONTAINER_FIELDS if k in c} if isinstance(c, dict) else c
            for c in containers]


def trim_pod(pod: JSON) -> JSON:
    """Drop what placement never reads from ``pod`` (in place; see the module docstring)."""
    meta = pod.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        meta.pop("annotations", None)
    spec = pod.get("spec")
    if isinstance(spec, dict):
        for key in ("containers", "initContainers"):
            if key in spec:
                spec[key] = _containers(spec[key])
        spec.pop("ephemeralContainers", None)
        volumes = spec.get("volumes")
        if isinstance(volumes, list):
            # an unread volume keeps its name: the queue asks only whether the pod has volumes
            spec["volumes"] = [
                {"name": v.get("name")} if isinstance(v, dict) and pod_volume(v) is None else v
                for v in volumes]
    status = pod.get("status")
    if isinstance(status, dict):
        kept = {k: status[k] for k in POD_STATUS_FIELDS if k in status}
        for key in CONTAINER_STATUSES:
            statuses = status.get(key)
            if isinstance(statuses, list):
                resized = [{k: cs[k] for k in STATUS_FIELDS if k in cs} for cs in statuses
                           if isinstance(cs, dict) and cs.get("resources") is not None]
                if resized:
                    kept[key] = resized
        conditions = status.get("conditions")
        if isinstance(conditions, list):
            # preemption waits for victims it is deleting (DisruptionTarget, set before the
            # delete); a pending resize that is infeasible changes the pod's requests
            read = [{k: c.get(k) for k in ("type", "status", "reason")}
                    for c in conditions
                    if isinstance(c, dict) and c.get("type") == "DisruptionTarget"]
            read += resize_conditions(conditions)
            if read:
                kept["conditions"] = read
        pod["status"] = kept
    return pod


def trim_node(node: JSON) -> JSON:
    """Drop what placement never reads from ``node`` (in place; see the module docstring)."""
    meta = node.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            if PREFER_AVOID_PODS_ANNOTATION in annotations:
                meta["annotations"] = {
                    PREFER_AVOID_PODS_ANNOTATION: annotations[PREFER_AVOID_PODS_ANNOTATION]}
            else:
                del meta["annotations"]
    spec = node.get("spec")
    if isinstance(spec, dict):
        node["spec"] = {k: spec[k] for k in NODE_SPEC_FIELDS if k in spec}
    status = node.get("status")
    if isinstance(status, dict):
        kept = {k: status[k] for k in NODE_STATUS_FIELDS if k in status}
        if "allocatable" not in status and "capacity" in status:
            kept["capacity"] = status["capacity"]  # the model's fallback
        conditions = kept.get("conditions")
        if isinstance(conditions, list):
            kept["conditions"] = [
                {k: c[k] for k in ("type", "status") if k in c} if isinstance(c, dict) else c
                for c in conditions]
        node["status"] = kept
    return node
