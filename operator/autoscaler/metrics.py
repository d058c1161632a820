"""Prometheus metrics with upstream cluster-autoscaler's names (``cluster_autoscaler_*``).

Design: module-level collectors on prometheus_client's default registry (the operator's metrics
endpoint serves that registry); the loop records one :class:`LoopFigures` per iteration through
:func:`record_loop` and counts scale-ups, scale-downs and failures as they happen, with
upstream's label values (``reason="underutilized"|"empty"``, ``reason="timeout"``, ...).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

NAMESPACE = "cluster_autoscaler"

cluster_safe_to_autoscale = Gauge(
    "cluster_safe_to_autoscale", "Whether or not cluster is healthy enough for autoscaling. "
    "1 if it is, 0 otherwise.", namespace=NAMESPACE)
nodes_count = Gauge("nodes_count", "Number of nodes in cluster.", ["state"], namespace=NAMESPACE)
node_groups_count = Gauge("node_groups_count", "Number of node groups managed by CA.",
                          ["node_group_type"], namespace=NAMESPACE)
unschedulable_pods_count = Gauge("unschedulable_pods_count",
                                 "Number of unschedulable pods in the cluster.",
                                 namespace=NAMESPACE)
max_nodes_count = Gauge("max_nodes_count", "Maximum number of nodes in all node groups",
                        namespace=NAMESPACE)
last_activity = Gauge("last_activity", "Last time certain part of CA logic executed.",
                      ["activity"], namespace=NAMESPACE)
function_duration_seconds = Histogram(
    "function_duration_seconds", "Time taken by various parts of CA main loop.", ["function"],
    namespace=NAMESPACE,
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 17.5, 20.0, 22.5, 25.0,
             27.5, 30.0, 50.0, 75.0, 100.0, 1000.0))
errors_total = Counter("errors_total", "The number of CA loops failed due to an error.", ["type"],
                       namespace=NAMESPACE)
scaled_up_nodes_total = Counter("scaled_up_nodes_total", "Number of nodes added by CA.",
                                namespace=NAMESPACE)
failed_scale_ups_total = Counter("failed_scale_ups_total",
                                 "Number of times scale-up operation has failed.", ["reason"],
                                 namespace=NAMESPACE)
scaled_down_nodes_total = Counter("scaled_down_nodes_total", "Number of nodes removed by CA.",
                                  ["reason"], namespace=NAMESPACE)
unneeded_nodes_count = Gauge("unneeded_nodes_count",
                             "Number of nodes currently considered unneeded by CA.",
                             namespace=NAMESPACE)
unremovable_nodes_count = Gauge("unremovable_nodes_count",
                                "Number of nodes currently considered unremovable by CA.",
                                ["reason"], namespace=NAMESPACE)
scale_down_in_cooldown = Gauge("scale_down_in_cooldown", "Whether or not the scale down is in "
                               "cooldown. 1 if its, 0 otherwise.", namespace=NAMESPACE)


_seen_reasons: set[str] = set()


@dataclass(frozen=True)
class LoopFigures:
    ready_nodes: int = 0
    unready_nodes: int = 0
    upcoming_nodes: int = 0
    node_groups: int = 0
    max_nodes: int = 0
    unschedulable_pods: int = 0
    unneeded_nodes: int = 0
    unremovable: Mapping[str, int] = field(default_factory=dict)
    in_cooldown: bool = False
    safe_to_autoscale: bool = True  # clusterstate.unsafe_to_autoscale found nothing


def record_loop(figures: LoopFigures, now: float | None = None) -> None:
    cluster_safe_to_autoscale.set(1 if figures.safe_to_autoscale else 0)
    nodes_count.labels("ready").set(figures.ready_nodes)
    nodes_count.labels("unready").set(figures.unready_nodes)
    nodes_count.labels("notStarted").set(0)
    nodes_count.labels("unregistered").set(figures.upcoming_nodes)
    nodes_count.labels("longUnregistered").set(0)
    node_groups_count.labels("autoscaled").set(figures.node_groups)
    node_groups_count.labels("autoprovisioned").set(0)
    max_nodes_count.set(figures.max_nodes)
    unschedulable_pods_count.set(figures.unschedulable_pods)
    unneeded_nodes_count.set(figures.unneeded_nodes)
    for reason in _seen_reasons - set(figures.unremovable):
        unremovable_nodes_count.labels(reason).set(0)  # no node is held back by it any more
    for reason, count in figures.unremovable.items():
        unremovable_nodes_count.labels(reason).set(count)
        _seen_reasons.add(reason)
    scale_down_in_cooldown.set(1 if figures.in_cooldown else 0)
    last_activity.labels("main").set(now if now is not None else time.time())
