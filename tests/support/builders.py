"""Small builders for Pod and Node dicts, shared by the unit tests of every area.

``make_pod(...)`` / ``make_node(...)`` take keyword arguments for the fields tests usually
vary and return plain API-shaped dicts (the same shape the API server serves), so the code
under test reads them exactly as it reads real objects. Anything not covered by a keyword can
be set on the returned dict, or passed through ``spec=`` to merge.

These are the one set of Pod and Node builders. An area whose tests share defaults (the
descheduler's pods are bound and owned by a ReplicaSet, the autoscaler's request 100m CPU) keeps
a thin wrapper that states those defaults and calls these; builders of other kinds (Machines,
MachineSets) live beside their area's tests. :func:`for_create` turns a built object into the
body an integration test POSTs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

_uids = itertools.count(1)


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def toleration(key: str = "", value: str = "", effect: str = "", operator: str = "",
               seconds: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if key:
        out["key"] = key
    if operator:
        out["operator"] = operator
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def match_expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def pod_affinity_term(labels: Mapping[str, str] | None = None, topology_key: str =
                      "kubernetes.io/hostname", *, expressions: Iterable[Mapping[str, Any]] = (),
                      namespaces: Iterable[str] | None = None,
                      namespace_selector: Mapping[str, Any] | None = None) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    if labels:
        selector["matchLabels"] = dict(labels)
    if expressions:
        selector["matchExpressions"] = list(expressions)
    term: dict[str, Any] = {"labelSelector": selector, "topologyKey": topology_key}
    if namespaces is not None:
        term["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        term["namespaceSelector"] = dict(namespace_selector)
    return term


def make_node(name: str = "node", *, cpu: str | int = "4", memory: str = "8Gi",
              pods: str | int = "110", labels: Mapping[str, str] | None = None,
              taints: Iterable[Mapping[str, Any]] = (), unschedulable: bool = False,
              extended: Mapping[str, str | int] | None = None, ready: bool = True,
              conditions: Mapping[str, str] | None = None,
              images: Mapping[str, int] | None = None,
              annotations: Mapping[str, str] | None = None,
              uid: str | None = None) -> dict[str, Any]:
    """A Ready node; ``labels`` always include kubernetes.io/hostname=<name>; ``extended`` adds
    allocatable (and capacity) resources such as ``nvidia.com/gpu``."""
    allocatable: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    allocatable.update({k: str(v) for k, v in (extended or {}).items()})
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    conds += [{"type": t, "status": s} for t, s in (conditions or {}).items()]
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": uid or f"node-uid-{next(_uids)}",
                     "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                   "conditions": conds},
    }
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if images:
        node["status"]["images"] = [{"names": [n], "sizeBytes": s} for n, s in images.items()]
    return node


def make_pod(name: str = "pod", namespace: str = "default", *, cpu: str | None = None,
             memory: str | None = None, requests: Mapping[str, str] | None = None,
             labels: Mapping[str, str] | None = None, node_name: str | None = None,
             node_selector: Mapping[str, str] | None = None,
             tolerations: Iterable[Mapping[str, Any]] = (),
             affinity: Mapping[str, Any] | None = None,
             required_node_terms: Iterable[Iterable[Mapping[str, Any]]] | None = None,
             preferred_node_terms: Iterable[tuple[int, Iterable[Mapping[str, Any]]]] = (),
             pod_affinity: Iterable[Mapping[str, Any]] = (),
             pod_anti_affinity: Iterable[Mapping[str, Any]] = (),
             preferred_pod_affinity: Iterable[tuple[int, Mapping[str, Any]]] = (),
             preferred_pod_anti_affinity: Iterable[tuple[int, Mapping[str, Any]]] = (),
             host_ports: Iterable[int] = (), priority: int | None = None,
             priority_class: str | None = None, preemption_policy: str | None = None,
             scheduler_name: str | None = None, uid: str | None = None,
             owner: tuple[str, str, str] | None = None, created: str | None = None,
             image: str = "registry.example/app:1", volumes: Iterable[Mapping[str, Any]] = (),
             spread: Iterable[Mapping[str, Any]] = (), phase: str | None = None,
             annotations: Mapping[str, str] | None = None, deleted_at: str | None = None,
             unschedulable: bool = False, owner_api_version: str = "v1",
             spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A one-container pod; resources only when given; ``node_name`` makes it bound.

    ``owner`` is the controller reference ``(kind, name, uid)``; ``deleted_at`` makes the pod
    terminating; ``unschedulable`` adds the PodScheduled False/Unschedulable condition the
    scheduler writes on a pod nothing fits."""
    req: dict[str, str] = dict(requests or {})
    if cpu is not None:
        req["cpu"] = cpu
    if memory is not None:
        req["memory"] = memory
    container: dict[str, Any] = {"name": "app", "image": image}
    if req:
        container["resources"] = {"requests": req}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"}
                              for p in host_ports]
    pod_spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        pod_spec["nodeName"] = node_name
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod_spec["tolerations"] = [dict(t) for t in tolerations]
    aff: dict[str, Any] = dict(affinity or {})
    if required_node_terms is not None or preferred_node_terms:
        na: dict[str, Any] = aff.setdefault("nodeAffinity", {})
        if required_node_terms is not None:
            na["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in required_node_terms]}
        if preferred_node_terms:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "preference": {"matchExpressions": list(t)}}
                for w, t in preferred_node_terms]
    pa, ppa = list(pod_affinity), list(preferred_pod_affinity)
    if pa or ppa:
        section = aff.setdefault("podAffinity", {})
        if pa:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = pa
        if ppa:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": dict(t)} for w, t in ppa]
    paa, ppaa = list(pod_anti_affinity), list(preferred_pod_anti_affinity)
    if paa or ppaa:
        section = aff.setdefault("podAntiAffinity", {})
        if paa:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = paa
        if ppaa:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": dict(t)} for w, t in ppaa]
    if aff:
        pod_spec["affinity"] = aff
    if priority is not None:
        pod_spec["priority"] = priority
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    if preemption_policy:
        pod_spec["preemptionPolicy"] = preemption_policy
    if scheduler_name:
        pod_spec["schedulerName"] = scheduler_name
    if volumes:
        pod_spec["volumes"] = [dict(v) for v in volumes]
    if spread:
        pod_spec["topologySpreadConstraints"] = [dict(c) for c in spread]
    pod_spec.update(spec or {})
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": uid or f"pod-uid-{next(_uids)}"}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        kind, owner_name, owner_uid = owner
        meta["ownerReferences"] = [{"apiVersion": owner_api_version, "kind": kind,
                                    "name": owner_name, "uid": owner_uid, "controller": True}]
    if created:
        meta["creationTimestamp"] = created
    if deleted_at:
        meta["deletionTimestamp"] = deleted_at
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec,
                           "status": {"phase": phase or ("Running" if node_name else "Pending")}}
    if node_name and created:
        pod["status"]["startTime"] = created
    if unschedulable:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable"}]
    return pod


def for_create(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The body to POST for a built object: without the fields the API server sets (uid,
    namespace, which the request's path gives, and status)."""
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items()
                        if k not in ("uid", "namespace")}
    return body


# ------------------------------------------------------------------ volumes
NO_PROVISIONER = "kubernetes.io/no-provisioner"  # component-helpers storage/volume


def make_storage_class(name: str = "local", provisioner: str = NO_PROVISIONER, *,
                       binding_mode: str = "WaitForFirstConsumer") -> dict[str, Any]:
    """A storage.k8s.io/v1 StorageClass; by default the local-volume kind (no provisioner,
    delayed binding)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": binding_mode}


def make_volume(name: str, *, node: str | None = None, storage_class: str = "local",
                size: str = "1Gi", claim: tuple[str, str] | None = None,
                phase: str | None = None) -> dict[str, Any]:
    """A local PersistentVolume; ``node`` pins it (required node affinity on
    ``kubernetes.io/hostname``); ``claim`` is the ``(namespace, name)`` it is bound to. The
    phase defaults to Bound with a claim, Available without."""
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                            "persistentVolumeReclaimPolicy": "Retain",
                            "storageClassName": storage_class,
                            "local": {"path": f"/mnt/disks/{name}"}}
    if node is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    if claim is not None:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                            "namespace": claim[0], "name": claim[1]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": spec, "status": {"phase": phase or ("Bound" if claim else "Available")}}


def make_claim(name: str, namespace: str = "default", *, storage_class: str = "local",
               size: str = "1Gi", volume: str | None = None) -> dict[str, Any]:
    """A PersistentVolumeClaim; ``volume`` binds it (``spec.volumeName`` and the PV
    controller's ``pv.kubernetes.io/bind-completed``), else it is Pending."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": f"pvc-uid-{next(_uids)}"}
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                            "resources": {"requests": {"storage": size}}}
    if volume is not None:
        spec["volumeName"] = volume
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def claim_volume(claim: str, name: str = "data") -> dict[str, Any]:
    """A pod's volume that mounts the claim named ``claim``."""
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}
