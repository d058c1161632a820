"""What the campaign runs: the fixed scene (nodes, MachineSets, autoscaling, a guarded
Deployment and its budget) and the churn (Deployments, bare pods, priorities, constraints).

Pure ``build_*`` functions return the objects; :class:`Churn` creates and deletes them at a
bounded rate (one API write per ``interval`` seconds on average) from a seeded random source,
so two runs with one seed ask for the same things in the same order (what the cluster makes of
them differs with timing).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.devcluster.nodes import fake_node

Obj = dict[str, Any]
APPS = group_path("apps", "v1")
POLICY = group_path("policy", "v1")
SCHEDULING = group_path("scheduling.k8s.io", "v1")
MACHINE_API = group_path("machine.openshift.io", "v1beta1")
AUTOSCALING = group_path("autoscaling.openshift.io", "v1")
AUTOSCALING_BETA = group_path("autoscaling.openshift.io", "v1beta1")
WORK = "chaos-work"
MACHINES = "chaos-machines"
SYSTEM = "chaos-system"
HIGH, LOW = "chaos-high", "chaos-low"
POOL_LABEL = "chaos.berthmaster.io/pool"
DEDICATED = {"key": "dedicated", "value": "chaos", "effect": "NoSchedule"}
GPU = "example.com/gpu"
ZONES = ("zone-a", "zone-b", "zone-c")
# MachineSet -> (MachineAutoscaler min, max, starting replicas, hooks owned by the examples)
POOLS = {"pool-a": (2, 3, 2), "pool-b": (0, 3, 1)}
STATIC = 5  # nodes no MachineSet owns: three workers, a tainted one, a GPU one
# The MachineSet a MachineHealthCheck watches (the mhc-remediation fault): not autoscaled, and
# tainted so no workload lands there (its remediation is judged, not the drain of its pods)
MHC_POOL, MHC_REPLICAS = "pool-mhc", 2
MHC_TAINT = {"key": "chaos.berthmaster.io/remediation", "value": "mhc", "effect": "NoSchedule"}
# one below the autoscaled pools' summed max (the cluster limit binds), with the MHC pool
MAX_NODES_TOTAL = STATIC + MHC_REPLICAS + 5


# ------------------------------------------------------------------ the scene


def static_node(kind: str, index: int) -> Obj:
    """A static kwok node: ``worker`` (zoned), ``dedicated`` (tainted) or ``gpu``."""
    name = f"{kind}-{index}"
    zone = ZONES[index % len(ZONES)]
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "30"}
    labels = {"chaos.berthmaster.io/static": kind}
    taints = None
    if kind == "dedicated":
        labels["dedicated"] = "chaos"
        taints = [DEDICATED]
    if kind == "gpu":
        capacity[GPU] = "2"
    return fake_node(name, labels=labels, taints=taints, capacity=capacity, zone=zone)


def static_nodes() -> list[Obj]:
    return [static_node("worker", i) for i in range(3)] + \
        [static_node("dedicated", 3), static_node("gpu", 4)]


def priority_class(name: str, value: int) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}


def machine_set(name: str, replicas: int, pool: str = "machines",
                taints: list[Obj] | None = None) -> Obj:
    labels = {"machine.openshift.io/cluster-api-machineset": name}
    spec: Obj = {"metadata": {"labels": {POOL_LABEL: pool,
                                         "topology.kubernetes.io/zone": "zone-m"}},
                 "providerSpec": {"value": {
                     "apiVersion": "berthmaster.io/v1alpha1",
                     "kind": "KwokMachineProviderSpec",
                     "capacity": {"cpu": "2", "memory": "4Gi", "pods": "30"}}}}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": MACHINES},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


def health_check(machine_set: str) -> Obj:
    """The MachineHealthCheck of ``machine_set``: a Node NotReady (or Unknown) for 1 s, the
    schema's minimum, is remediated (machine-api-operator's machinehealthcheck_controller.go:
    the Machine deleted, its MachineSet replaces it). ``maxUnhealthy`` stays the default."""
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
            "metadata": {"name": machine_set, "namespace": MACHINES},
            "spec": {"selector": {"matchLabels": {
                         "machine.openshift.io/cluster-api-machineset": machine_set}},
                     "unhealthyConditions": [
                         {"type": "Ready", "status": "False", "timeout": "1s"},
                         {"type": "Ready", "status": "Unknown", "timeout": "1s"}]}}


def machine_autoscaler(target: str, low: int, high: int) -> Obj:
    return {"apiVersion": "autoscaling.openshift.io/v1beta1", "kind": "MachineAutoscaler",
            "metadata": {"name": target, "namespace": MACHINES},
            "spec": {"minReplicas": low, "maxReplicas": high,
                     "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1",
                                        "kind": "MachineSet", "name": target}}}


def cluster_autoscaler() -> Obj:
    return {"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "metadata": {"name": "default"},
            "spec": {"resourceLimits": {"maxNodesTotal": MAX_NODES_TOTAL},
                     "scaleDown": {"enabled": True, "delayAfterAdd": "15s",
                                   "delayAfterDelete": "5s", "delayAfterFailure": "10s",
                                   "unneededTime": "20s"}}}


def pod_spec(scheduler: str, cpu: str = "100m", memory: str = "64Mi",
             priority: str | None = None, extra: Obj | None = None,
             resources: Obj | None = None, ports: list[Obj] | None = None) -> Obj:
    container: Obj = {"name": "c", "image": "busybox",
                      "resources": {"requests": {"cpu": cpu, "memory": memory,
                                                 **(resources or {})},
                                    "limits": dict(resources or {})}}
    if ports:
        container["ports"] = ports
    spec: Obj = {"schedulerName": scheduler, "containers": [container],
                 "terminationGracePeriodSeconds": 0}
    if priority:
        spec["priorityClassName"] = priority
    spec.update(extra or {})
    return spec


def guarded(scheduler: str) -> tuple[Obj, Obj]:
    """The Deployment that lives on the Machines' nodes, and its budget (2 of 3)."""
    labels = {"app": "guarded"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "guarded", "namespace": WORK},
                  "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": pod_spec(
                               scheduler, priority=HIGH,
                               extra={"nodeSelector": {POOL_LABEL: "machines"}})}}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "guarded", "namespace": WORK},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}}}
    return deployment, pdb


# ------------------------------------------------------------------ the churn

FLAVOURS = ("plain", "anti-affinity", "spread", "toleration", "gpu", "host-port", "low", "high",
            "pool")


def flavour_spec(flavour: str, app: str, scheduler: str, rng: random.Random) -> Obj:
    """A pod spec of one flavour; ``app`` is the label the pod's own constraints select."""
    selector = {"matchLabels": {"app": app}}
    if flavour == "anti-affinity":
        return pod_spec(scheduler, extra={"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}})
    if flavour == "spread":
        return pod_spec(scheduler, extra={
            "nodeSelector": {"chaos.berthmaster.io/static": "worker"},
            "topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule",
                                           "topologyKey": "topology.kubernetes.io/zone",
                                           "labelSelector": selector}]})
    if flavour == "toleration":
        return pod_spec(scheduler, extra={
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "chaos",
                             "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "dedicated", "operator": "In", "values": ["chaos"]}]}]}}}})
    if flavour == "gpu":
        return pod_spec(scheduler, resources={GPU: "1"})
    if flavour == "host-port":
        return pod_spec(scheduler, ports=[{"containerPort": 80, "protocol": "TCP",
                                           "hostPort": 8080 + rng.randrange(2)}])
    if flavour == "low":
        return pod_spec(scheduler, cpu="500m", priority=LOW)
    if flavour == "high":
        return pod_spec(scheduler, cpu="1500m", priority=HIGH)
    if flavour in ("pool", "pool-big"):
        return pod_spec(scheduler, cpu="700m" if flavour == "pool" else "1200m",
                        extra={"nodeSelector": {POOL_LABEL: "machines"}})
    return pod_spec(scheduler)


def bare_pod(name: str, flavour: str, scheduler: str, rng: random.Random) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": WORK,
                         "labels": {"app": name, "chaos.berthmaster.io/flavour": flavour}},
            "spec": flavour_spec(flavour, name, scheduler, rng)}


def deployment(name: str, flavour: str, replicas: int, scheduler: str,
               rng: random.Random) -> Obj:
    labels = {"app": name, "chaos.berthmaster.io/flavour": flavour}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": WORK},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": flavour_spec(flavour, name, scheduler, rng)}}}


@dataclass
class Churn:
    """Creates and deletes workload objects at a bounded rate until stopped."""

    kube: KubeClient
    scheduler: str
    rng: random.Random
    interval: float = 1.5
    max_live: int = 24
    machine_delete_every: float = 45.0
    live: list[tuple[float, str]] = field(default_factory=list)  # (expires, path)
    counts: dict[str, int] = field(default_factory=dict)
    serial: int = 0
    last_machine_delete: float = 0.0
    on_error: Callable[[KubeError], None] | None = None  # a write the API server refused

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    async def run(self, stop: asyncio.Event, busy: Callable[[], bool] = lambda: False) -> None:
        while not stop.is_set():
            try:
                await self.step()
            except KubeError as error:
                self._count("write errors" if error.status else "connection errors")
                if self.on_error is not None:
                    self.on_error(error)
            except (OSError, TimeoutError):
                pass
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.rng.uniform(0.5, 1.5) * self.interval)

    async def step(self) -> None:
        now = time.monotonic()
        expired = [entry for entry in self.live if entry[0] <= now]
        if expired:
            self.live.remove(expired[0])
            await self._delete(expired[0][1])
            return
        if now - self.last_machine_delete > self.machine_delete_every:
            self.last_machine_delete = now
            if await self.delete_a_machine():
                return
        if len(self.live) >= self.max_live:
            return
        self.serial += 1
        flavour = self.rng.choice(FLAVOURS)
        name = f"{flavour}-{self.serial}"
        if self.rng.random() < 0.5 and flavour not in ("high", "low"):
            replicas = self.rng.randint(1, 3)
            path = resource_path(APPS, "deployments", WORK, name)
            await self.kube.create(resource_path(APPS, "deployments", WORK),
                                   deployment(name, flavour, replicas, self.scheduler, self.rng))
            self._count("deployments created")
        else:
            path = resource_path(CORE, "pods", WORK, name)
            await self.kube.create(resource_path(CORE, "pods", WORK),
                                   bare_pod(name, flavour, self.scheduler, self.rng))
            self._count("bare pods created")
        self.live.append((now + self.rng.uniform(20, 90), path))

    async def _delete(self, path: str) -> None:
        try:
            await self.kube.delete(path, {"propagationPolicy": "Background"})
            self._count("objects deleted")
        except KubeError as error:
            if not error.not_found:
                raise

    async def delete_a_machine(self) -> bool:
        """Delete one Running Machine of pool-a (its MachineSet replaces it; the replacement
        hook holds the drain until then)."""
        items, _ = await self.kube.list_all(
            resource_path(MACHINE_API, "machines", MACHINES),
            labelSelector="machine.openshift.io/cluster-api-machineset=pool-a")
        running = [m for m in items if not m["metadata"].get("deletionTimestamp")
                   and (m.get("status") or {}).get("phase") == "Running"]
        if len(running) < 2:
            return False
        victim = self.rng.choice(sorted(running, key=lambda m: m["metadata"]["name"]))
        await self.kube.delete(resource_path(MACHINE_API, "machines", MACHINES,
                                             victim["metadata"]["name"]))
        self._count("machines deleted")
        return True

    async def pool_burst(self, count: int) -> None:
        """Bare pods that fit only on new Machines' nodes: a scale-up to come."""
        now = time.monotonic()
        for _ in range(count):
            self.serial += 1
            name = f"burst-{self.serial}"
            await self.kube.create(resource_path(CORE, "pods", WORK),
                                   bare_pod(name, "pool-big", self.scheduler, self.rng))
            self._count("bare pods created")
            self.live.append((now + self.rng.uniform(30, 60),
                              resource_path(CORE, "pods", WORK, name)))

    async def clean(self) -> None:
        for _, path in self.live:
            with contextlib.suppress(KubeError):
                await self._delete(path)
        self.live.clear()
