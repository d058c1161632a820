"""The scheduler's metric families, labels and buckets are kube-scheduler 1.35's.

Upstream: kubernetes v1.35.4 pkg/scheduler/metrics/metrics.go (``scheduleAttempts``,
``SchedulingAlgorithmLatency``, ``PreemptionVictims``, ``CacheSize`` — ``scheduler_cache_size``
since 1.34, no longer ``scheduler_scheduler_cache_size`` — ...) and k8s.io/component-base
v0.35.4 metrics/prometheus/clientgo/leaderelection/metrics.go (``leader_election_master_status``
by ``name``). The process and Python collectors stand for Go's ``process_*``/``go_*``.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from berthmaster.scheduler.daemon.metrics import SchedulerMetrics, exponential_buckets


def families() -> dict[str, tuple[str, ...]]:
    metrics = SchedulerMetrics("berthmaster")
    metrics.attempt("scheduled", 0.01)
    metrics.scheduled(1, 0.5)
    metrics.bind("Success", 0.001)
    metrics.incoming("active", "PodAdd")
    metrics.unschedulable(frozenset({"GeneralPredicates"}), 1)
    metrics.cache_size.labels("nodes").set(1)
    metrics.leading("berthmaster", True)
    metrics.algorithm_duration.observe(0.001)
    metrics.preemption_attempts.inc()
    metrics.preemption_victims.observe(1)
    metrics.plugin_execution("LicensedNodes", "Filter", "Success", 0.00002)
    metrics.plugin_evaluated("LicensedNodes", "Filter", "berthmaster")
    metrics.permit_waited("Success", 0.5)
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        labels = {k for s in family.samples for k in s.labels if k not in ("le", "quantile")}
        found[family.name] = tuple(sorted(labels))
    return found


UPSTREAM = {
    "scheduler_schedule_attempts": ("profile", "result"),
    "scheduler_scheduling_attempt_duration_seconds": ("profile", "result"),
    "scheduler_scheduling_algorithm_duration_seconds": (),
    "scheduler_preemption_victims": (),
    "scheduler_preemption_attempts": (),
    "scheduler_pending_pods": ("queue",),
    "scheduler_pod_scheduling_sli_duration_seconds": ("attempts",),
    "scheduler_pod_scheduling_attempts": (),
    "scheduler_framework_extension_point_duration_seconds": ("extension_point", "profile",
                                                             "status"),
    "scheduler_queue_incoming_pods": ("event", "queue"),
    "scheduler_cache_size": ("type",),
    "scheduler_unschedulable_pods": ("plugin", "profile"),
    "leader_election_master_status": ("name",),
    # PluginExecutionDuration, PluginEvaluationTotal (a counter: its samples end in _total)
    "scheduler_plugin_execution_duration_seconds": ("extension_point", "plugin", "status"),
    "scheduler_plugin_evaluation": ("extension_point", "plugin", "profile"),
    # PermitWaitDuration
    "scheduler_permit_wait_duration_seconds": ("result",),
}


@pytest.mark.parametrize(("name", "labels"), sorted(UPSTREAM.items()))
def test_family_and_labels(name: str, labels: tuple[str, ...]) -> None:
    assert families()[name] == labels


def test_no_family_outside_upstreams_names() -> None:
    ours = {n for n in families() if n.startswith(("scheduler_", "leader_election_"))}
    assert ours == set(UPSTREAM)
    assert "scheduler_scheduler_cache_size" not in families()


def test_runtime_collectors() -> None:
    names = set(families())
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_info",
            "python_gc_collections"} <= names


@pytest.mark.parametrize(("attribute", "buckets"), [
    ("attempt_duration", exponential_buckets(0.001, 2, 15)),
    ("algorithm_duration", exponential_buckets(0.001, 2, 15)),
    ("preemption_victims", exponential_buckets(1, 2, 7)),
    ("sli_duration", exponential_buckets(0.01, 2, 20)),
    ("scheduling_attempts", exponential_buckets(1, 2, 5)),
    ("binding_duration", exponential_buckets(0.0001, 2, 12)),
    ("plugin_execution_duration", exponential_buckets(0.00001, 1.5, 20)),
    ("permit_wait_duration", exponential_buckets(0.001, 2, 15)),
])
def test_buckets(attribute: str, buckets: list[float]) -> None:
    histogram = getattr(SchedulerMetrics("p"), attribute)
    assert list(histogram._upper_bounds[:-1]) == buckets  # the last bound is +Inf
