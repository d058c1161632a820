"""Prometheus metrics under kube-scheduler's names, and the /metrics, /healthz, /readyz server.

Design: the metric names, label names and histogram buckets are kube-scheduler's (see
``pkg/scheduler/metrics``), so its dashboards and alerts work unchanged; ``profile`` is the
scheduler name. Each :class:`SchedulerMetrics` owns a private registry, so two schedulers in one
process (the integration tests) do not collide. The HTTP server is aiohttp's (already a
dependency of the API client) and serves three paths: ``/metrics`` (the text exposition),
``/healthz`` (the process works; fails when this replica believes it leads but has not renewed
its Lease within the renew deadline, as kube-scheduler's leader-election health check) and
``/readyz`` (caches synced).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # type: ignore[no-untyped-call]  # kube-scheduler has no *_created

log = logging.getLogger("berthmaster.scheduler.metrics")


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class SchedulerMetrics:
    def __init__(self, profile: str):
        self.profile = profile
        self.registry = CollectorRegistry()
        r = self.registry
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
            "scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"],
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
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.", ["type"],
            registry=r)
        self.binding_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12), registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod counts once "
            "for every plugin (here: Policy predicate) that rejected it, while it waits in the "
            "unschedulable queue.", ["plugin", "profile"], registry=r)
        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending_pods.labels(queue).set(0)

    # ---- observations used by the scheduler loop --------------------------------------------
    def attempt(self, result: str, seconds: float) -> None:
        self.schedule_attempts.labels(result, self.profile).inc()
        self.attempt_duration.labels(result, self.profile).observe(seconds)

    def scheduled(self, attempts: int, since_first_seen: float) -> None:
        self.sli_duration.labels(str(attempts)).observe(since_first_seen)
        self.scheduling_attempts.observe(attempts)

    def pending(self, counts: dict[str, int]) -> None:
        for queue, count in counts.items():
            self.pending_pods.labels(queue).set(count)

    def incoming(self, queue: str, event: str) -> None:
        self.queue_incoming.labels(queue, event).inc()

    def unschedulable(self, plugins: frozenset[str], delta: int) -> None:
        for plugin in plugins:
            self.unschedulable_pods.labels(plugin, self.profile).inc(delta)

    def bind(self, status: str, seconds: float) -> None:
        self.binding_duration.labels("Bind", status, self.profile).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


async def serve(
    metrics: SchedulerMetrics,
    address: str,
    healthy: Callable[[], tuple[bool, str]],
    ready: Callable[[], tuple[bool, str]],
) -> web.AppRunner:
    """Start the HTTP server on ``host:port`` (``:port`` means every interface)."""

    async def metrics_handler(_: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return response

    def check(probe: Callable[[], tuple[bool, str]]) -> Callable[[web.Request], object]:
        async def handler(_: web.Request) -> web.Response:
            ok, detail = probe()
            return web.Response(status=200 if ok else 500, text="ok" if ok else detail)
        return handler

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", check(healthy))  # type: ignore[arg-type]
    app.router.add_get("/readyz", check(ready))  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = address.rpartition(":")
    site = web.TCPSite(runner, host or "0.0.0.0", int(port))
    await site.start()
    log.info("serving metrics and health", extra={"address": address})
    return runner
