"""``berthmaster admission``: the placement admission webhook as a process of its own.

Design: one asyncio event loop holds the API client, the HTTPS webhook server
(service.AdmissionService) and, with ``--metrics-bind-address`` or ``--secure-port``, the
endpoint of /metrics, /healthz and /readyz (berthmaster.foundation.serving: plain HTTP, or HTTPS
with
kube-scheduler's delegated authentication and authorization, the chart's default). Nothing
here is shared with the operator: a pod flood on the webhook cannot delay a Machine reconcile,
and an operator restart or upgrade leaves admission serving. The process is stateless (the
certificate and configuration are read from the API server or mounted files), so the chart runs
two replicas behind a Service.

Start: preflight (the account's access and the configuration; exit 2 naming what is wrong),
then the service; ``/readyz`` turns 200 once the webhook serves. SIGTERM/SIGINT: ``/readyz``
turns 500 and the webhook keeps serving for ``--shutdown-delay-seconds`` (the Service and
kube-proxy stop sending to a terminating replica only after a moment, and with
``failurePolicy: Fail`` a refused connection refuses a pod), then the servers stop (requests in
flight finish within aiohttp's shutdown) and the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from berthmaster.foundation import logs
from berthmaster.foundation.serving_options import SecureServing, add_secure_serving_arguments
from berthmaster.foundation.verbosity import add_verbosity
from berthmaster.operator.admission import options

AGENT_NAME = "berthmaster-admission"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser)
    add_secure_serving_arguments(parser)
    logs.add_log_format(parser)
    add_verbosity(parser)


def run(args: argparse.Namespace) -> int:
    logs.configure("admission", args.log_format, args.verbosity)
    settings = options.settings_from_args(args)
    secure = SecureServing.from_args(args)
    try:
        return asyncio.run(main(settings, args.kubeconfig, secure))
    except KeyboardInterrupt:
        return 130


async def main(settings: options.AdmissionSettings, kubeconfig: str | None,
               secure: SecureServing | None = None) -> int:
    from berthmaster.foundation.kube import KubeClient, user_agent
    from berthmaster.foundation.serving import serve
    from berthmaster.operator.admission.metrics import AdmissionMetrics
    from berthmaster.operator.admission.service import AdmissionService, preflight

    client = await KubeClient.connect(kubeconfig, agent=user_agent(AGENT_NAME))
    metrics = AdmissionMetrics()
    service = AdmissionService(client, settings, metrics)
    health = None
    draining = False

    def ready() -> tuple[bool, str]:
        if draining:
            return False, "shutting down"
        return (True, "ok") if service.serving else (False, "not serving yet")

    try:
        await preflight(client, settings)
        if settings.metrics_address or secure is not None:
            health = await serve(metrics.exposition, settings.metrics_address,
                                 lambda: (True, "ok"), ready, secure, kubeconfig)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await service.start()
        await stop.wait()
        draining = True
        await asyncio.sleep(settings.shutdown_delay_seconds)
        return 0
    finally:
        await service.stop()
        if health is not None:
            await health.cleanup()
        await client.close()
