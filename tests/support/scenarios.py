"""Random, seeded scheduling scenarios for comparing berthmaster with kube-scheduler.

A :class:`Scenario` is a small cluster (2..6 nodes with labels, zones, taints of every effect,
capacity, an extended resource, sometimes cordoned), the pods already running on it (bound by
``spec.nodeName``, in two namespaces, some with required anti-affinity, host ports and
priorities) and a few incoming pods. Each incoming pod is placed on the scenario's cluster as
it is, alone: the harness removes it again before the next one, so every incoming pod is one
independent question ("where does this pod go, and if nowhere, why?").

Incoming pods draw from everything both schedulers implement: node selectors, required and
preferred node affinity (In, NotIn, Exists, DoesNotExist, Gt), tolerations (Equal, Exists,
empty effect, the cordon taint), required pod affinity and anti-affinity across namespaces
(``namespaces`` and ``namespaceSelector``), host ports, topology spread (DoNotSchedule and
ScheduleAnyway, zone and hostname, nodeTaintsPolicy), cpu / memory / extended-resource
requests, init containers, a RuntimeClass overhead, and priorities with preemption (and
``preemptionPolicy: Never``).

``generate(seed, count)`` is pure: the same seed gives the same scenarios, ordered by node
count, largest first, so the harness only ever deletes nodes between scenarios (a new node
would have to wait for the node-lifecycle controller's ``not-ready`` taint to go).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

NODE_PREFIX = "diff-n"
MAX_NODES = 6
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
ZONES = ("zone-a", "zone-b", "zone-c")
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
)
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: dict[str, str]
    taints: list[JSON]
    capacity: dict[str, str]
    unschedulable: bool


@dataclass
class Scenario:
    index: int
    nodes: list[NodeSpec]
    existing: list[JSON]
    incoming: list[JSON] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"scenario {self.index}:"]
        for n in self.nodes:
            lines.append(f"  node {n.name} labels={n.labels} taints={n.taints} "
                         f"capacity={n.capacity} unschedulable={n.unschedulable}")
        for p in self.existing:
            lines.append(f"  existing {p['metadata']['namespace']}/{p['metadata']['name']} "
                         f"-> {p['spec']['nodeName']}: {_spec_summary(p)}")
        return "\n".join(lines)


def _spec_summary(pod: JSON) -> str:
    spec = {k: v for k, v in pod["spec"].items()
            if k not in ("schedulerName", "terminationGracePeriodSeconds", "nodeName")}
    return f"labels={pod['metadata'].get('labels')} spec={spec}"


def describe_pod(pod: JSON) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: {_spec_summary(pod)}"


def _node(rng: random.Random, index: int) -> NodeSpec:
    labels: dict[str, str] = {}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(ZONES)
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if rng.random() < 0.3:
        labels["cores"] = str(rng.choice((2, 4, 8)))
    taints = [dict(t) for t in TAINTS if rng.random() < 0.12]
    capacity = {"cpu": rng.choice(("1", "2", "4")), "memory": rng.choice(("2Gi", "4Gi", "8Gi")),
                "pods": rng.choice(("3", "5", "110")), "ephemeral-storage": "20Gi"}
    if rng.random() < 0.3:
        capacity[GPU] = str(rng.choice((1, 2)))
    return NodeSpec(f"{NODE_PREFIX}{index}", labels, taints, capacity, rng.random() < 0.08)


def _container(name: str, requests: dict[str, str]) -> JSON:
    container: JSON = {"name": name, "image": IMAGE}
    if requests:
        container["resources"] = {"requests": dict(requests)}
        if GPU in requests:  # extended resources: requests must equal limits
            container["resources"]["limits"] = {GPU: requests[GPU]}
    return container


def _pod(name: str, namespace: str, labels: dict[str, str], requests: dict[str, str]) -> JSON:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [_container("c", requests)]}}


def _term(rng: random.Random, key_choices: tuple[str, ...] = (HOSTNAME, ZONE)) -> JSON:
    term: JSON = {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                  "topologyKey": rng.choice(key_choices)}
    roll = rng.random()
    if roll < 0.3:
        term["namespaces"] = rng.sample(sorted(NAMESPACES), rng.choice((1, 2)))
    elif roll < 0.5:
        term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(("a", "b"))}}
    elif roll < 0.6:
        term["namespaceSelector"] = {}
    return term


def _requirement(rng: random.Random) -> JSON:
    kind = rng.random()
    if kind < 0.35:
        return {"key": ZONE, "operator": rng.choice(("In", "NotIn")),
                "values": rng.sample(ZONES, rng.choice((1, 2)))}
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
    if GPU in node.capacity and rng.random() < 0.4:
        requests[GPU] = "1"
    pod = _pod(f"old-{i}", namespace, labels, requests)
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
    return pod


def _incoming(rng: random.Random, nodes: list[NodeSpec], name: str) -> JSON:
    namespace = rng.choice(sorted(NAMESPACES))
    labels = {"app": rng.choice(APPS)}
    requests: dict[str, str] = {}
    if rng.random() < 0.85:
        requests["cpu"] = rng.choice(("100m", "500m", "1", "1500m", "2", "3", "5"))
    if rng.random() < 0.6:
        requests["memory"] = rng.choice(("256Mi", "1Gi", "3Gi", "6Gi", "10Gi"))
    if rng.random() < 0.12:
        requests[GPU] = rng.choice(("1", "2"))
    pod = _pod(name, namespace, labels, requests)
    spec = pod["spec"]
    if rng.random() < 0.15:
        spec["initContainers"] = [_container("init", {
            "cpu": rng.choice(("500m", "2", "3")), "memory": rng.choice(("128Mi", "4Gi"))})]
    if rng.random() < 0.1:
        spec["runtimeClassName"] = RUNTIME_CLASS
    if rng.random() < 0.25:
        choice = rng.random()
        if choice < 0.5:
            spec["nodeSelector"] = {ZONE: rng.choice(ZONES)}
        else:
            spec["nodeSelector"] = {"disk": rng.choice(("ssd", "hdd"))}
    affinity: JSON = {}
    if rng.random() < 0.3:
        terms = [{"matchExpressions": [_requirement(rng)
                                       for _ in range(rng.choice((1, 1, 2)))]}
                 for _ in range(rng.choice((1, 1, 2)))]
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    if rng.random() < 0.2:
        affinity.setdefault("nodeAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((1, 50, 100)),
             "preference": {"matchExpressions": [_requirement(rng)]}}]
    if rng.random() < 0.15:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng) for _ in range(rng.choice((1, 1, 2)))]}
    if rng.random() < 0.2:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(rng)]}
    if rng.random() < 0.15:
        affinity.setdefault("podAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((1, 100)), "podAffinityTerm": _term(rng)}]
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.45:
        spec["tolerations"] = [_toleration(rng, nodes) for _ in range(rng.choice((1, 2, 3)))]
    if rng.random() < 0.15:
        spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080,
                                           "protocol": "TCP"}]
    if rng.random() < 0.2:
        constraint: JSON = {"maxSkew": rng.choice((1, 1, 2)),
                            "topologyKey": rng.choice((ZONE, ZONE, HOSTNAME)),
                            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule",
                                                             "ScheduleAnyway")),
                            "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}}
        if rng.random() < 0.25:
            constraint["nodeTaintsPolicy"] = "Honor"
        spec["topologySpreadConstraints"] = [constraint]
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


def scenario(seed: int, index: int) -> Scenario:
    rng = random.Random(f"{seed}:{index}")
    nodes = [_node(rng, i) for i in range(rng.randint(2, MAX_NODES))]
    existing: list[JSON] = []
    room = {n.name: int(n.capacity["pods"]) for n in nodes}
    ported: set[str] = set()
    for i in range(rng.randint(0, 8)):
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
    incoming = [_incoming(rng, nodes, f"new-{j}") for j in range(rng.randint(1, 3))]
    return Scenario(index, nodes, existing, incoming)


def generate(seed: int, count: int) -> list[Scenario]:
    """``count`` scenarios from ``seed``, largest node count first (see the module doc)."""
    scenarios = [scenario(seed, i) for i in range(count)]
    return sorted(scenarios, key=lambda s: -len(s.nodes))


def copy_for(pod: JSON, scheduler: str, suffix: str) -> JSON:
    """The incoming pod, named ``<name>-<suffix>``, for ``scheduler``."""
    body = copy.deepcopy(pod)
    body["metadata"]["name"] = f"{pod['metadata']['name']}-{suffix}"
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
