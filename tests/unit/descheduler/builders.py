"""Small builders for descheduler unit tests: raw pod and node dicts as the API returns them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from berthmaster.foundation.times import format_rfc3339
from berthmaster.scheduler.descheduler.context import ClusterState, StrategyContext, Tally
from berthmaster.scheduler.descheduler.evictor import (
    EvictionBook,
    drive_planned,
    planned_attempt,
)
from berthmaster.scheduler.descheduler.protection import EvictorSettings
from berthmaster.scheduler.descheduler.usage_metrics import ActualUsage
from tests.support import builders

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
_ids = itertools.count()


def make_node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
              labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
              ready: bool = True, unschedulable: bool = False) -> dict[str, Any]:
    """tests/support/builders.make_node with the node's uid derived from its name."""
    return builders.make_node(name, cpu=cpu, memory=memory, pods=pods, labels=labels,
                              taints=taints or (), ready=ready, unschedulable=unschedulable,
                              uid=f"node-{name}")


def make_pod(name: str, node: str, namespace: str = "default", owner: str | None = "rs-a",
             owner_kind: str = "ReplicaSet", cpu: str | None = None, memory: str | None = None,
             labels: dict[str, str] | None = None, priority: int | None = None,
             phase: str = "Running", age: timedelta = timedelta(hours=1),
             annotations: dict[str, str] | None = None, volumes: list[dict[str, Any]] | None = None,
             image: str = "nginx", **spec: Any) -> dict[str, Any]:
    """tests/support/builders.make_pod with the descheduler's defaults: bound to ``node``,
    running, controlled by ReplicaSet ``owner`` (``None``: a bare pod), created ``age`` before
    ``NOW``; extra keywords are spec fields."""
    pod = builders.make_pod(
        name, namespace, node_name=node, cpu=cpu, memory=memory, labels=labels,
        priority=priority, phase=phase, created=format_rfc3339(NOW - age),
        annotations=annotations, volumes=volumes or (), image=image,
        uid=f"uid-{name}-{next(_ids)}", owner_api_version="apps/v1",
        owner=(owner_kind, owner, f"owner-{owner}") if owner else None, spec=spec)
    del pod["status"]["startTime"]  # tests of the start time (minPodAge, PodLifeTime) set it
    return pod


def everywhere(pod: dict[str, Any], node: str) -> bool:
    return True


def plan(
    module: Any, params: Any, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
    settings: EvictorSettings | None = None, node_fit: Callable[[dict[str, Any], str], bool]
    = everywhere, book: EvictionBook | None = None, actual_usage: ActualUsage | None = None,
    prometheus_usage: dict[str, ActualUsage] | None = None,
) -> tuple[list[str], Tally]:
    """Run one strategy's decision with every admissible candidate evicted; names evicted."""
    state = ClusterState(nodes, pods, node_fit=node_fit, now=NOW)
    state.actual_usage = actual_usage
    state.prometheus_usage = dict(prometheus_usage or {})
    tally = Tally(module.NAME)
    ctx = StrategyContext(state, settings or EvictorSettings(), tally)
    drive_planned(module.decide(params, ctx), planned_attempt(book or EvictionBook(), ctx))
    return [key.split("/", 1)[1] for key in tally.evicted], tally
