"""Prometheus metrics under kube-scheduler's names, and the /metrics, /healthz, /readyz server.

Design: the metric names, label names and histogram buckets are kube-scheduler's (see
``pkg/scheduler/metrics``), so its dashboards and alerts work unchanged; ``profile`` is the
scheduler name. Each :class:`SchedulerMetrics` owns a private registry, so two schedulers in one
process (the integration tests) do not collide. The HTTP server (berthmaster.foundation.serving)
serves
``/metrics`` (the text exposition), ``/healthz`` (the process works; fails when this replica
believes it leads but has not renewed its Lease within the renew deadline, as kube-scheduler's
leader-election health check) and
``/readyz`` (caches synced).

Beside kube-scheduler's own families the registry carries what every Kubernetes component
exports through component-base: ``leader_election_master_status{name}`` (1 while this replica
holds the Lease named ``name``, 0 while it stands by; client-go's leaderelection metrics) and
the process and runtime collectors (``process_*``, ``python_info``, ``python_gc_*``), the
Python counterparts of Go's ``process_*``/``go_*``. One family is berthmaster's own, named in
upstream's style: ``berthmaster_informer_restarts_total{resource}``, the informers restarted
after an unexpected failure (client-go's reflector restarts its ``ListAndWatch`` and exports
no such count; see :mod:`.cache`).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from berthmaster.foundation.serving import register_runtime_collectors


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class SchedulerMetrics:
    def __init__(self, profile: str):
        self.profile = profile
        self.registry = CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        register_runtime_collectors(r)
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result. "
            "'unschedulable' means a pod could not be scheduled, while 'error' means an internal "
            "scheduler problem.", ["result", "profile"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=exponential_buckets(0.001, 2, 15), registry=r)
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15), registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods", "Number of pending pods, by the queue type. 'active' "
            "means number of pods in activeQ; 'backoff' means number of pods in backoffQ; "
            "'unschedulable' means number of pods in unschedulablePods that the scheduler "
            "attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.", ["queue"],
            registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now",
            registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7), registry=r)
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.", ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20), registry=r)
        self.scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5), registry=r)
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods", "Number of pods added to scheduling queues by event "
            "and queue type.", ["queue", "event"], registry=r)
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.", ["type"],
            registry=r)
        self.binding_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12), registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment "
            "the gauge for all plugins that caused it to not schedule and so this metric have "
            "meaning only when broken down by plugin.", ["plugin", "profile"], registry=r)
        self.leader_status = Gauge(
            "leader_election_master_status", "Gauge of if the reporting system is master of "
            "the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string "
            "used to identify the lease. Please make sure to group by name.", ["name"],
            registry=r)
        # pkg/scheduler/metrics/metrics.go, PluginExecutionDuration and PluginEvaluationTotal:
        # fed by the out-of-tree plugins (plugins.out_of_tree), every call rather than
        # upstream's 10% sample
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20), registry=r)
        self.plugin_evaluation = Counter(
            "scheduler_plugin_evaluation", "Number of attempts to schedule pods by each plugin "
            "and the extension point (available only in PreFilter, Filter, PreScore, and "
            "Score).", ["plugin", "extension_point", "profile"], registry=r)
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds", "Duration of waiting on permit.",
            ["result"], buckets=exponential_buckets(0.001, 2, 15), registry=r)
        self.informer_restarts = Counter(
            "berthmaster_informer_restarts", "Number of times an informer was restarted after "
            "an unexpected failure, by resource.", ["resource"], registry=r)
        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending_pods.labels(queue).set(0)

    # ---- observations used by the scheduler loop --------------------------------------------
    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: the labelled children are few and fixed, and the
        client's lookup (a lock and a label check) ran several times per pod otherwise."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def attempt(self, result: str, seconds: float) -> None:
        self._child(self.schedule_attempts, result, self.profile).inc()
        self._child(self.attempt_duration, result, self.profile).observe(seconds)

    def scheduled(self, attempts: int, since_first_seen: float) -> None:
        self._child(self.sli_duration, str(attempts)).observe(since_first_seen)
        self.scheduling_attempts.observe(attempts)

    def pending(self, counts: dict[str, int]) -> None:
        for queue, count in counts.items():
            self._child(self.pending_pods, queue).set(count)

    def incoming(self, queue: str, event: str) -> None:
        self._child(self.queue_incoming, queue, event).inc()

    def unschedulable(self, plugins: frozenset[str], delta: int) -> None:
        for plugin in plugins:
            self.unschedulable_pods.labels(plugin, self.profile).inc(delta)

    def bind(self, status: str, seconds: float) -> None:
        self._child(self.binding_duration, "Bind", status, self.profile).observe(seconds)

    def plugin_execution(self, plugin: str, extension_point: str, status: str,
                         seconds: float) -> None:
        self._child(self.plugin_execution_duration, plugin, extension_point, status
                    ).observe(seconds)

    def plugin_evaluated(self, plugin: str, extension_point: str, profile: str) -> None:
        self._child(self.plugin_evaluation, plugin, extension_point, profile).inc()

    def permit_waited(self, result: str, seconds: float) -> None:
        """WaitOnPermit's wait, by its outcome's code (Success, Unschedulable)."""
        self._child(self.permit_wait_duration, result).observe(seconds)

    def informer_restart(self, resource: str) -> None:
        self.informer_restarts.labels(resource).inc()

    def leading(self, lease: str, leader: bool) -> None:
        self.leader_status.labels(lease).set(1 if leader else 0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
