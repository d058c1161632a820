"""Small builders for descheduler unit tests: raw pod and node dicts as the API returns them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from berthmaster.scheduler.descheduler.context import ClusterState, StrategyContext, Tally
from berthmaster.scheduler.descheduler.evictor import (
    EvictionBook,
    drive_planned,
    planned_attempt,
)
from berthmaster.scheduler.descheduler.protection import EvictorSettings

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
_ids = itertools.count()


def make_node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
              labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
              ready: bool = True, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"node-{name}",
                     "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def make_pod(name: str, node: str, namespace: str = "default", owner: str | None = "rs-a",
             owner_kind: str = "ReplicaSet", cpu: str | None = None, memory: str | None = None,
             labels: dict[str, str] | None = None, priority: int | None = None,
             phase: str = "Running", age: timedelta = timedelta(hours=1),
             annotations: dict[str, str] | None = None, volumes: list[dict[str, Any]] | None = None,
             image: str = "nginx", **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    meta: dict[str, Any] = {
        "name": name, "namespace": namespace, "uid": f"uid-{name}-{next(_ids)}",
        "labels": labels or {}, "annotations": annotations or {},
        "creationTimestamp": (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner_kind, "name": owner, "controller": True,
                                    "apiVersion": "apps/v1", "uid": f"owner-{owner}"}]
    body: dict[str, Any] = {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [
            {"name": "c", "image": image, "resources": {"requests": requests} if requests else {}}],
            "volumes": volumes or [], **spec},
        "status": {"phase": phase},
    }
    if priority is not None:
        body["spec"]["priority"] = priority
    return body


def everywhere(pod: dict[str, Any], node: str) -> bool:
    return True


def plan(
    module: Any, params: Any, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
    settings: EvictorSettings | None = None, node_fit: Callable[[dict[str, Any], str], bool]
    = everywhere, book: EvictionBook | None = None,
) -> tuple[list[str], Tally]:
    """Run one strategy's decision with every admissible candidate evicted; names evicted."""
    state = ClusterState(nodes, pods, node_fit=node_fit, now=NOW)
    tally = Tally(module.NAME)
    ctx = StrategyContext(state, settings or EvictorSettings(), tally)
    drive_planned(module.decide(params, ctx), planned_attempt(book or EvictionBook(), ctx))
    return [key.split("/", 1)[1] for key in tally.evicted], tally
