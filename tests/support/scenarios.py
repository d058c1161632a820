"""Random, seeded scheduling scenarios for comparing berthmaster with kube-scheduler.

A :class:`Scenario` is a cluster (mostly 2..8 nodes, sometimes 20..100, rarely
101..150 — where kube-scheduler scores a sample of the feasible nodes; nodes in up to five
zones, with labels, taints of every effect, capacity, an extended resource, container images of
several sizes in ``status.images``, sometimes cordoned), the pods already running on it (bound
by ``spec.nodeName``, in two namespaces, some with required anti-affinity, host ports,
priorities, and some owned by a ReplicaSet or a StatefulSet that a Service selects) and a few
incoming pods. Each incoming pod is placed on the scenario's cluster as
it is, alone: the harness removes it again before the next one, so every incoming pod is one
independent question ("where does this pod go, and if nowhere, why?").

Incoming pods draw from everything both schedulers implement: node selectors, required and
preferred node affinity (In, NotIn, Exists, DoesNotExist, Gt), tolerations (Equal, Exists,
empty effect, the cordon taint), required pod affinity and anti-affinity across namespaces
(``namespaces`` and ``namespaceSelector``), host ports, topology spread (DoNotSchedule and
ScheduleAnyway, zone and hostname, nodeTaintsPolicy), cpu / memory / extended-resource
requests, init containers, a RuntimeClass overhead, and priorities with preemption (and
``preemptionPolicy: Never``), pod-level resources (``spec.resources`` requests and limits,
alone or over container requests, :func:`pod_level`), preferred pod (anti-)affinity, several
spread constraints a pod,
``matchExpressions`` selectors, images (ImageLocality), pods with no requests at all, and pods
owned by a ReplicaSet or StatefulSet that a Service selects (kube-scheduler's system-default
spreading applies to those: pkg/scheduler/framework/plugins/podtopologyspread/common.go,
buildDefaultConstraints; pkg/scheduler/framework/plugins/helper/spread.go, DefaultSelector).

The controllers are :func:`controller_name`'s (one ReplicaSet and one StatefulSet per app and
namespace) and the Services :data:`SERVICES`; a pod they own carries an ``ownerReference``
whose ``uid`` the harness fills in (the objects exist only once it made them). A StatefulSet's
pods are named ``<set>-<ordinal>``: its controller releases owned pods of any other name
(pkg/controller/statefulset/stateful_set.go, getPodsForStatefulSet).

Running pods take pod-level resources too, and some were resized in place: their
``status`` (written by the harness once kwok made them Running, as a kubelet would) reports
container resources and ``allocatedResources`` above or below the spec, sometimes with a
``PodResizePending`` condition (Deferred or Infeasible), :func:`resized`. Both shapes draw from
a random stream of their own, so every other part of a scenario is what it was without them.

A share of the small scenarios also carries storage (:mod:`tests.support.volume_scenarios`:
StorageClasses, local volumes, claims bound and unbound, CSINodes, a CSIDriver, CSIStorage
Capacities) and some of its incoming pods mount claims.

``generate(seed, count)`` is pure: the same seed gives the same scenarios, ordered by node
count, largest first, so the harness only ever deletes nodes between scenarios (a new node
would have to wait for the node-lifecycle controller's ``not-ready`` taint to go).
"""

from __future__ import annotations

import copy
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.pod_resources import aggregate_container_requests
from berthmaster.scheduler.quantities import CPU as CPU_NAME
from berthmaster.scheduler.quantities import MEMORY as MEMORY_NAME
from berthmaster.scheduler.quantities import quantity_value
from tests.support.volume_scenarios import Volumes
from tests.support.volume_scenarios import build as build_volumes

JSON = dict[str, Any]

NODE_PREFIX = "diff-n"
NAMESPACES = {"diff-a": {"team": "a"}, "diff-b": {"team": "b"}}
PRIORITY_CLASSES = {"diff-low": (10, "PreemptLowerPriority"),
                    "diff-mid": (100, "PreemptLowerPriority"),
                    "diff-high": (1000, "PreemptLowerPriority"),
                    "diff-high-never": (1000, "Never")}
RUNTIME_CLASS = "diff-overhead"
RUNTIME_OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
GPU = "example.com/gpu"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
APPS = ("web", "db", "cache")
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d", "zone-e")
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
    {"key": "noisy", "value": "yes", "effect": "PreferNoSchedule"},
    {"key": "legacy", "effect": "PreferNoSchedule"},
)
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
IMAGE = "registry.k8s.io/pause:3.10"
MB = 1024 * 1024
# name -> size: ImageLocality scores images between 23 MB and 1000 MB a container
# (pkg/scheduler/framework/plugins/imagelocality/image_locality.go); an untagged name is
# normalised with ":latest" (normalizedImageName)
IMAGES = {
    IMAGE: 700 * 1024,
    "example.com/web:1.0": 90 * MB,
    "example.com/db:2": 450 * MB,
    "example.com/ml": 1600 * MB,
    "example.com/tools:3": 30 * MB,
}
CONTROLLER_LABEL = "controller"  # "rs" or "ss": what a controller's selector adds to app
CONTROLLER_KINDS = ("ReplicaSet", "StatefulSet")
# Service name -> selector, in every namespace: web pods whoever owns them, cache pods owned by
# a StatefulSet; no Service selects db pods (a controller's selector alone still gives an owned
# db pod default spreading: DefaultSelector adds the owner's selector)
SERVICES = {"diff-svc-web": {"app": "web"},
            "diff-svc-cache": {"app": "cache", CONTROLLER_LABEL: "ss"}}
# copy suffix -> the digits a StatefulSet pod's copy gets instead (its name stays a member's)
ORDINAL_SUFFIX = {"k": "1", "b": "2", "p": "3"}


def controller_name(kind: str, app: str) -> str:
    """The ReplicaSet or StatefulSet of ``app`` (one of each per app and namespace; each
    selects its app and its CONTROLLER_LABEL value)."""
    return f"diff-{'rs' if kind == 'ReplicaSet' else 'ss'}-{app}"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: dict[str, str]
    taints: list[JSON]
    capacity: dict[str, str]
    unschedulable: bool
    images: list[JSON] = field(default_factory=list)


@dataclass
class Scenario:
    index: int
    nodes: list[NodeSpec]
    existing: list[JSON]
    incoming: list[JSON] = field(default_factory=list)
    storage: Volumes | None = None

    def describe(self) -> str:
        lines = [f"scenario {self.index}:"]
        for n in self.nodes:
            images = [f"{i['names'][0]}={i['sizeBytes'] // MB}M" for i in n.images]
            lines.append(f"  node {n.name} labels={n.labels} taints={n.taints} "
                         f"capacity={n.capacity} unschedulable={n.unschedulable} "
                         f"images={images}")
        for p in self.existing:
            lines.append(f"  existing {p['metadata']['namespace']}/{p['metadata']['name']} "
                         f"-> {p['spec']['nodeName']}: {_spec_summary(p)}")
        if self.storage is not None:
            lines.extend(self.storage.describe())
        return "\n".join(lines)


def _spec_summary(pod: JSON) -> str:
    spec = {k: v for k, v in pod["spec"].items()
            if k not in ("schedulerName", "terminationGracePeriodSeconds", "nodeName")}
    owners = [f"{o['kind']}/{o['name']}" for o in pod["metadata"].get("ownerReferences") or []]
    owned = f" owner={owners}" if owners else ""
    status = pod.get("status")
    shown = f" status={status}" if status else ""
    return f"labels={pod['metadata'].get('labels')}{owned} spec={spec}{shown}"


def describe_pod(pod: JSON) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: {_spec_summary(pod)}"


def _node_count(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.03:
        return rng.randint(101, 150)
    if roll < 0.12:
        return rng.randint(20, 100)
    return rng.randint(2, 8)


def _image_entry(name: str) -> JSON:
    digest = f"sha256:{hashlib.sha256(name.encode()).hexdigest()}"
    repo = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return {"names": [name, f"{repo}@{digest}"], "sizeBytes": IMAGES[name]}


def _node(rng: random.Random, index: int, zones: tuple[str, ...]) -> NodeSpec:
    labels: dict[str, str] = {}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(zones)
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if rng.random() < 0.3:
        labels["cores"] = str(rng.choice((2, 4, 8)))
    taints = [dict(t) for t in TAINTS if rng.random() < 0.1]
    capacity = {"cpu": rng.choice(("1", "2", "4", "8")),
                "memory": rng.choice(("2Gi", "4Gi", "8Gi", "16Gi")),
                "pods": rng.choice(("3", "5", "110")), "ephemeral-storage": "20Gi"}
    if rng.random() < 0.3:
        capacity[GPU] = str(rng.choice((1, 2)))
    images = [_image_entry(name) for name in sorted(IMAGES) if rng.random() < 0.35]
    return NodeSpec(f"{NODE_PREFIX}{index}", labels, taints, capacity, rng.random() < 0.08,
                    images)


def _container(rng: random.Random, name: str, requests: dict[str, str]) -> JSON:
    image = IMAGE if rng.random() < 0.3 else rng.choice(sorted(IMAGES))
    container: JSON = {"name": name, "image": image}
    if requests:
        container["resources"] = {"requests": dict(requests)}
        if GPU in requests:  # extended resources: requests must equal limits
            container["resources"]["limits"] = {GPU: requests[GPU]}
    return container


def _pod(rng: random.Random, name: str, namespace: str, labels: dict[str, str],
         requests: dict[str, str]) -> JSON:
    containers = [_container(rng, "c", requests)]
    if rng.random() < 0.2:
        containers.append(_container(rng, "sidecar", {}))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": containers}}


def _own(rng: random.Random, pod: JSON, ordinal: int) -> None:
    """Make ``pod`` a ReplicaSet's or StatefulSet's (its app's), sometimes."""
    if rng.random() >= 0.35:
        return
    meta = pod["metadata"]
    app = meta["labels"]["app"]
    kind = rng.choice(CONTROLLER_KINDS)
    name = controller_name(kind, app)
    meta["labels"][CONTROLLER_LABEL] = "rs" if kind == "ReplicaSet" else "ss"
    meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": name,
                                "uid": "", "controller": True,
                                "blockOwnerDeletion": False}]
    if kind == "StatefulSet":
        meta["name"] = f"{name}-{ordinal}"


def _selector(rng: random.Random) -> JSON:
    roll = rng.random()
    if roll < 0.65:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    if roll < 0.8:
        return {"matchExpressions": [{"key": "app", "operator": "In",
                                      "values": rng.sample(APPS, 2)}]}
    if roll < 0.9:
        return {"matchExpressions": [{"key": "app", "operator": "NotIn",
                                      "values": [rng.choice(APPS)]}]}
    return {"matchLabels": {"app": rng.choice(APPS)},
            "matchExpressions": [{"key": CONTROLLER_LABEL,
                                  "operator": rng.choice(("Exists", "DoesNotExist"))}]}


def _term(rng: random.Random, key_choices: tuple[str, ...] = (HOSTNAME, ZONE)) -> JSON:
    term: JSON = {"labelSelector": _selector(rng), "topologyKey": rng.choice(key_choices)}
    roll = rng.random()
    if roll < 0.3:
        term["namespaces"] = rng.sample(sorted(NAMESPACES), rng.choice((1, 2)))
    elif roll < 0.5:
        term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(("a", "b"))}}
    elif roll < 0.6:
        term["namespaceSelector"] = {}
    return term


def _requirement(rng: random.Random, zones: tuple[str, ...]) -> JSON:
    kind = rng.random()
    if kind < 0.35:
        return {"key": ZONE, "operator": rng.choice(("In", "NotIn")),
                "values": rng.sample(zones, min(len(zones), rng.choice((1, 2))))}
    if kind < 0.6:
        return {"key": "disk", "operator": rng.choice(("In", "NotIn")),
                "values": [rng.choice(("ssd", "hdd"))]}
    if kind < 0.8:
        return {"key": rng.choice(("disk", "cores", ZONE)),
                "operator": rng.choice(("Exists", "DoesNotExist"))}
    return {"key": "cores", "operator": rng.choice(("Gt", "Lt")),
            "values": [str(rng.choice((1, 3, 6)))]}


def _toleration(rng: random.Random, nodes: list[NodeSpec]) -> JSON:
    pool = [t for n in nodes for t in n.taints] + [UNSCHEDULABLE_TAINT, *TAINTS]
    taint = rng.choice(pool)
    roll = rng.random()
    if roll < 0.5:
        tol: JSON = {"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""),
                     "effect": taint["effect"]}
    elif roll < 0.8:
        tol = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
    else:
        tol = {"key": taint["key"], "operator": "Exists"}
    return tol


def _existing(rng: random.Random, nodes: list[NodeSpec], i: int) -> JSON:
    node = rng.choice(nodes)
    namespace = rng.choice(sorted(NAMESPACES))
    labels = {"app": rng.choice(APPS)}
    requests = {"cpu": rng.choice(("100m", "250m", "500m", "1", "1", "1500m", "2")),
                "memory": rng.choice(("128Mi", "512Mi", "1Gi", "2Gi"))}
    if rng.random() < 0.1:
        requests = {}
    if GPU in node.capacity and rng.random() < 0.4:
        requests[GPU] = "1"
    pod = _pod(rng, f"old-{i}", namespace, labels, requests)
    _own(rng, pod, i)
    spec = pod["spec"]
    spec["nodeName"] = node.name
    # pods the taint-eviction controller would remove must not be there to begin with
    tolerations = [{"key": t["key"], "operator": "Exists", "effect": "NoExecute"}
                   for t in node.taints if t["effect"] == "NoExecute"]
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.6:
        spec["priorityClassName"] = rng.choice(("diff-low", "diff-low", "diff-mid"))
    if rng.random() < 0.2:
        spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080,
                                           "protocol": "TCP"}]
    if rng.random() < 0.2:
        spec["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}}
    elif rng.random() < 0.15:
        spec["affinity"] = {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}}
    elif rng.random() < 0.15:
        # existing pods' preferred terms count in the incoming pod's InterPodAffinity score
        spec["affinity"] = {rng.choice(("podAffinity", "podAntiAffinity")): {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.choice((1, 10, 100)), "podAffinityTerm": _term(rng)}]}}
    return pod


def _spread(rng: random.Random) -> list[JSON]:
    """One to three constraints, no two with the same topologyKey and whenUnsatisfiable
    (the API server refuses duplicates)."""
    constraints: list[JSON] = []
    seen: set[tuple[str, str]] = set()
    for _ in range(rng.choice((1, 1, 2, 3))):
        key = rng.choice((ZONE, ZONE, HOSTNAME, "disk"))
        when = rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"))
        if (key, when) in seen:
            continue
        seen.add((key, when))
        constraint: JSON = {"maxSkew": rng.choice((1, 1, 2, 3)), "topologyKey": key,
                            "whenUnsatisfiable": when, "labelSelector": _selector(rng)}
        if rng.random() < 0.25:
            constraint["nodeTaintsPolicy"] = "Honor"
        if rng.random() < 0.15:
            constraint["nodeAffinityPolicy"] = "Ignore"
        constraints.append(constraint)
    return constraints


def _incoming(rng: random.Random, nodes: list[NodeSpec], name: str, ordinal: int,
              zones: tuple[str, ...]) -> JSON:
    namespace = rng.choice(sorted(NAMESPACES))
    labels = {"app": rng.choice(APPS)}
    requests: dict[str, str] = {}
    if rng.random() < 0.85:
        requests["cpu"] = rng.choice(("100m", "500m", "1", "1500m", "2", "3", "5"))
    if rng.random() < 0.6:
        requests["memory"] = rng.choice(("256Mi", "1Gi", "3Gi", "6Gi", "10Gi"))
    if rng.random() < 0.12:
        requests[GPU] = rng.choice(("1", "2"))
    if rng.random() < 0.15:
        requests = {}  # no requests at all: scored with the non-zero defaults
    pod = _pod(rng, name, namespace, labels, requests)
    _own(rng, pod, ordinal)
    spec = pod["spec"]
    if rng.random() < 0.15:
        spec["initContainers"] = [_container(rng, "init", {
            "cpu": rng.choice(("500m", "2", "3")), "memory": rng.choice(("128Mi", "4Gi"))})]
    if rng.random() < 0.1:
        spec["runtimeClassName"] = RUNTIME_CLASS
    if rng.random() < 0.25:
        choice = rng.random()
        if choice < 0.5:
            spec["nodeSelector"] = {ZONE: rng.choice(zones)}
        else:
            spec["nodeSelector"] = {"disk": rng.choice(("ssd", "hdd"))}
    affinity: JSON = {}
    if rng.random() < 0.3:
        terms = [{"matchExpressions": [_requirement(rng, zones)
                                       for _ in range(rng.choice((1, 1, 2)))]}
                 for _ in range(rng.choice((1, 1, 2)))]
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    if rng.random() < 0.3:
        affinity.setdefault("nodeAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((1, 20, 50, 100)),
             "preference": {"matchExpressions": [_requirement(rng, zones)]}}
            for _ in range(rng.choice((1, 1, 2, 3)))]
    if rng.random() < 0.15:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng) for _ in range(rng.choice((1, 1, 2)))]}
    if rng.random() < 0.2:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng)]}
    if rng.random() < 0.2:
        affinity.setdefault("podAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((1, 100)), "podAffinityTerm": _term(rng)}]
    if rng.random() < 0.25:
        affinity.setdefault("podAntiAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((1, 30, 100)), "podAffinityTerm": _term(rng)}
            for _ in range(rng.choice((1, 1, 2)))]
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.45:
        spec["tolerations"] = [_toleration(rng, nodes) for _ in range(rng.choice((1, 2, 3)))]
    if rng.random() < 0.15:
        spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080,
                                           "protocol": "TCP"}]
    if rng.random() < 0.25:
        spec["topologySpreadConstraints"] = _spread(rng)
    roll = rng.random()
    if roll < 0.16:
        spec["priorityClassName"] = "diff-high"
    elif roll < 0.2:
        spec["priorityClassName"] = "diff-high-never"
    elif roll < 0.3:
        spec["priorityClassName"] = rng.choice(("diff-low", "diff-mid"))
    if roll < 0.2 and rng.random() < 0.7:
        # a size that running pods could make room for: where preemption has work to do
        spec["containers"][0]["resources"] = {"requests": {
            "cpu": rng.choice(("500m", "1", "1500m")), "memory": "256Mi"}}
    return pod


def _milli(value: int) -> str:
    return f"{value}m"


def pod_level(rng: random.Random, pod: JSON) -> None:
    """Give ``pod`` pod-level cpu and/or memory (``spec.resources``): requests, limits (the API
    server defaults the requests from the containers' or from the limits: pkg/apis/core/v1/
    defaults.go, defaultPodRequests) or both; never below the containers' aggregate requests
    (pkg/apis/core/validation/validation.go, validatePodResourceConsistency)."""
    aggregated = aggregate_container_requests(pod, use_status=False)
    names = rng.choice(((CPU_NAME,), (MEMORY_NAME,), (CPU_NAME, MEMORY_NAME)))
    form = rng.choice(("requests", "requests", "limits", "both"))
    requests: JSON = {}
    limits: JSON = {}
    for name in names:
        extra = rng.choice((0, 100, 500, 1000, 2000)) if name == CPU_NAME else \
            rng.choice((0, 128 * MB, 1024 * MB, 3072 * MB))
        amount = aggregated.get(name, 0) + extra
        if amount == 0:
            amount = 100 if name == CPU_NAME else 128 * MB
        text = _milli(amount) if name == CPU_NAME else str(amount)
        if form in ("requests", "both"):
            requests[name] = text
        if form == "limits":
            limits[name] = text
        elif form == "both":
            more = rng.choice((0, 500)) if name == CPU_NAME else rng.choice((0, 512 * MB))
            limits[name] = _milli(amount + more) if name == CPU_NAME else str(amount + more)
    pod["spec"]["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits))
                                if v}


def resized(rng: random.Random, pod: JSON) -> None:
    """Make ``pod`` (running) one resized in place: its container statuses report cpu and
    memory requests above or below the spec (``resources``, ``allocatedResources``), sometimes
    with the resize pending (Deferred, or Infeasible: the spec then no longer counts; see
    k8s.io/component-helpers resource/helpers.go, determineEffectiveRequests)."""
    statuses = []
    for container in pod["spec"]["containers"]:
        spec = (container.get("resources") or {}).get("requests") or {}
        actual: JSON = {}
        cpu = quantity_value(CPU_NAME, spec[CPU_NAME]) if CPU_NAME in spec else 0
        memory = quantity_value(MEMORY_NAME, spec[MEMORY_NAME]) if MEMORY_NAME in spec else 0
        if cpu or rng.random() < 0.3:
            actual[CPU_NAME] = _milli(max(50, rng.choice((cpu // 2, cpu * 2, cpu + 500))))
        if memory or rng.random() < 0.3:
            actual[MEMORY_NAME] = str(max(64 * MB, rng.choice((memory // 2, memory * 2,
                                                               memory + 512 * MB))))
        allocated = dict(actual) if rng.random() < 0.7 else {
            k: v for k, v in spec.items() if k in (CPU_NAME, MEMORY_NAME)}
        statuses.append({"name": container["name"], "image": container["image"], "ready": True,
                         "restartCount": 0, "started": True,
                         "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                         "resources": {"requests": actual}, "allocatedResources": allocated})
    status: JSON = {"containerStatuses": statuses}
    roll = rng.random()
    if roll < 0.3:
        status["conditions"] = [{
            "type": "PodResizePending", "status": "True",
            "reason": "Infeasible" if roll < 0.15 else "Deferred",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    pod["status"] = status


def _resource_shapes(seed: int, index: int, existing: list[JSON],
                     incoming: list[JSON]) -> None:
    """Pod-level resources and in-place resizes, from a stream of their own (see the module
    docstring). Pods that ask for the extended resource keep container-level requests only
    (pod-level resources support cpu, memory and hugepages)."""
    rng = random.Random(f"{seed}:{index}:resources")
    for pod in existing:
        if rng.random() < 0.15 and not _asks_gpu(pod):
            pod_level(rng, pod)
        elif rng.random() < 0.2:
            resized(rng, pod)
    for pod in incoming:
        if rng.random() < 0.2 and not _asks_gpu(pod):
            pod_level(rng, pod)


def _asks_gpu(pod: JSON) -> bool:
    return any(GPU in ((c.get("resources") or {}).get("requests") or {})
               for c in pod["spec"]["containers"])


def scenario(seed: int, index: int) -> Scenario:
    rng = random.Random(f"{seed}:{index}")
    count = _node_count(rng)
    zones = ZONES[:rng.randint(1, len(ZONES))] if count > 8 else ZONES[:3]
    nodes = [_node(rng, i, zones) for i in range(count)]
    existing: list[JSON] = []
    room = {n.name: int(n.capacity["pods"]) for n in nodes}
    ported: set[str] = set()
    wanted = rng.randint(0, 8) if count <= 8 else rng.randint(count // 2, 2 * count)
    for i in range(wanted):
        pod = _existing(rng, nodes, i)
        node = pod["spec"]["nodeName"]
        if room[node] <= 1:  # leave every node room for one more
            continue
        room[node] -= 1
        if "ports" in pod["spec"]["containers"][0]:
            # a kubelet admits one pod per host port (its admission runs NodePorts); two on
            # one node would be a state no real cluster has, where upstream's port set
            # (HostPortInfo) frees the port when either pod is removed
            if node in ported:
                del pod["spec"]["containers"][0]["ports"]
            ported.add(node)
        existing.append(pod)
    incoming = [_incoming(rng, nodes, f"new-{j}", 1000 + j, zones)
                for j in range(rng.randint(1, 3))]
    # its own random stream: a scenario with storage is otherwise the one it was without
    storage = build_volumes(seed, index, [(n.name, n.labels) for n in nodes], incoming, zones)
    _resource_shapes(seed, index, existing, incoming)
    return Scenario(index, nodes, existing, incoming, storage)


def generate(seed: int, count: int, start: int = 0) -> list[Scenario]:
    """``count`` scenarios from ``seed`` (indices ``start`` on), largest node count first (see
    the module doc)."""
    scenarios = [scenario(seed, i) for i in range(start, start + count)]
    return sorted(scenarios, key=lambda s: -len(s.nodes))


def copy_for(pod: JSON, scheduler: str, suffix: str) -> JSON:
    """The incoming pod, named ``<name>-<suffix>``, for ``scheduler`` (a StatefulSet's pod:
    ``<name><digit>``, still ``<set>-<ordinal>``)."""
    body = copy.deepcopy(pod)
    name = pod["metadata"]["name"]
    owners = pod["metadata"].get("ownerReferences") or []
    if any(o["kind"] == "StatefulSet" for o in owners):
        body["metadata"]["name"] = f"{name}{ORDINAL_SUFFIX[suffix]}"
    else:
        body["metadata"]["name"] = f"{name}-{suffix}"
    body["spec"]["schedulerName"] = scheduler
    return body


def pinned(pod: JSON, node: str) -> JSON:
    """``pod`` that may only go to ``node`` (its node affinity ANDed with metadata.name)."""
    body = copy.deepcopy(pod)
    affinity = body["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution",
                                   {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": [node]}]
    return body
