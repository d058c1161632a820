"""Builders for autoscaler unit tests: pods, nodes, MachineSets, Machines; ``fits`` is the
scheduler's real placement engine, so the decisions are tested against the one placement truth.
"""

from __future__ import annotations

from typing import Any

from berthmaster.operator.autoscaler.groups import MAX_SIZE_KEY, MIN_SIZE_KEY
from berthmaster.scheduler.engine import Engine
from tests.support import builders

JSON = dict[str, Any]


def placement() -> Engine:
    """The scheduler's placement engine with its default policy (seeded: repeatable ties)."""
    return Engine(seed=0)


fits = placement()


def make_pod(name: str, cpu: str = "100m", memory: str = "128Mi", namespace: str = "ns",
             node: str | None = None, unschedulable: bool = False, priority: int | None = None,
             owner: str | None = "ReplicaSet", labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, volumes: list[JSON] | None = None,
             node_selector: dict[str, str] | None = None, tolerations: list[JSON] | None = None,
             affinity: JSON | None = None) -> JSON:
    """tests/support/builders.make_pod with the autoscaler's defaults: 100m CPU and 128Mi
    requested, labelled ``app: <name>``, controlled by a ``<name>-rs`` of kind ``owner``
    (``None``: a bare pod); ``node`` binds it, ``unschedulable`` marks it as the scheduler
    does when nothing fits."""
    return builders.make_pod(
        name, namespace, cpu=cpu, memory=memory, node_name=node, unschedulable=unschedulable,
        priority=priority, labels=labels or {"app": name}, annotations=annotations,
        volumes=volumes or (), node_selector=node_selector, tolerations=tolerations or (),
        affinity=affinity, image="i", uid=f"uid-{namespace}-{name}",
        owner=(owner, f"{name}-rs", f"owner-{name}") if owner else None,
        owner_api_version="apps/v1")


def make_node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
              labels: dict[str, str] | None = None, taints: list[JSON] | None = None,
              annotations: dict[str, str] | None = None,
              extra: dict[str, str] | None = None) -> JSON:
    """tests/support/builders.make_node; ``extra`` are extended resources."""
    return builders.make_node(name, cpu=cpu, memory=memory, pods=pods, labels=labels,
                              taints=taints or (), annotations=annotations, extended=extra,
                              uid=f"uid-{name}")


def make_machine_set(name: str, replicas: int = 1, min_size: int | None = 0,
                     max_size: int | None = 5, cpu: str = "4", memory: str = "8Gi",
                     namespace: str = "machines", labels: dict[str, str] | None = None,
                     taints: list[JSON] | None = None,
                     annotations: dict[str, str] | None = None) -> JSON:
    notes: dict[str, str] = dict(annotations or {})
    if min_size is not None:
        notes[MIN_SIZE_KEY] = str(min_size)
    if max_size is not None:
        notes[MAX_SIZE_KEY] = str(max_size)
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": namespace, "annotations": notes},
        "spec": {"replicas": replicas, "template": {"spec": {
            "metadata": {"labels": labels or {}},
            "taints": taints or [],
            "providerSpec": {"value": {"capacity": {"cpu": cpu, "memory": memory,
                                                    "pods": "110"}}}}}},
    }


def make_machine(name: str, machine_set: str, node: str | None, namespace: str = "machines",
                 deleting: bool = False) -> JSON:
    meta: JSON = {"name": name, "namespace": namespace,
                  "ownerReferences": [{"kind": "MachineSet", "name": machine_set,
                                       "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: JSON = {"nodeRef": {"kind": "Node", "name": node}} if node else {}
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": meta,
            "status": status}
