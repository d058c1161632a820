"""The components' HTTP endpoint: ``/metrics``, ``/healthz`` and ``/readyz`` on one address.

Design: the scheduler and the operator serve the same three paths on their
``--metrics-bind-address``, with aiohttp (already the API client's transport) in the component's
own event loop: ``/metrics`` is the Prometheus text exposition of the component's registry,
``/healthz`` says the process works and ``/readyz`` that it is connected and its caches are
synced; each probe answers 200 ``ok`` or 500 with the reason. Every registry also carries the
process and runtime collectors (:func:`register_runtime_collectors`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# Go components export no *_created series; neither do ours (process-wide, before any metric).
disable_created_metrics()  # type: ignore[no-untyped-call]

log = logging.getLogger("berthmaster.serving")

Probe = Callable[[], tuple[bool, str]]


def register_runtime_collectors(registry: CollectorRegistry) -> None:
    """The process (``process_*``), platform (``python_info``) and garbage-collector
    (``python_gc_*``) collectors on ``registry``: prometheus_client puts them on its default
    registry only, and every component exports them as Go components export ``process_*`` and
    ``go_*``."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)


async def serve(exposition: Callable[[], bytes], address: str, healthy: Probe,
                ready: Probe) -> web.AppRunner:
    """Start the HTTP server on ``host:port`` (``:port`` means every interface)."""

    async def metrics_handler(_: web.Request) -> web.Response:
        response = web.Response(body=exposition())
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return response

    def check(probe: Probe) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            ok, detail = probe()
            return web.Response(status=200 if ok else 500, text="ok" if ok else detail)
        return handler

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", check(healthy))
    app.router.add_get("/readyz", check(ready))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = address.rpartition(":")
    site = web.TCPSite(runner, host or "0.0.0.0", int(port))
    await site.start()
    log.info("serving metrics and health", extra={"address": address})
    return runner
