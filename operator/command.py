"""``berthmaster operator``: run the kopf operator with every capability that is installed.

Design: the capabilities (Machines and MachineSets, Descheduler resources, cluster autoscaling)
register their kopf handlers when their ``handlers`` module is imported; this module imports
them, applies the operator-wide settings (explicit watch timeouts, a finalizer-safe posting of
events, the liveness endpoint) in a startup handler, and hands control to ``kopf.run``.
Handlers are idempotent, so a restart mid-way repeats nothing harmful.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
from typing import Any

from berthmaster.foundation import logs
from berthmaster.foundation.kube import CONTROLLER_MANAGER_BURST as DEFAULT_BURST
from berthmaster.foundation.kube import CONTROLLER_MANAGER_QPS as DEFAULT_QPS
from berthmaster.foundation.serving_options import SecureServing, add_secure_serving_arguments
from berthmaster.foundation.verbosity import add_verbosity

CAPABILITIES: dict[str, tuple[str, ...]] = {
    "machines": ("berthmaster.operator.machines.handlers",),
    "machinehealthchecks": ("berthmaster.operator.machines.healthcheck_handlers",),
    # the Descheduler resource, and OpenShift 4's KubeDescheduler through the same runs
    "deschedulers": ("berthmaster.operator.deschedulers.handlers",
                     "berthmaster.operator.deschedulers.kubedescheduler"),
    "autoscaler": ("berthmaster.operator.autoscaler.handlers",),
    "podgroups": ("berthmaster.operator.podgroups.handlers",),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument(
        "--namespace", action="append", default=None,
        help="watch only this namespace (repeatable; default: the whole cluster)",
    )
    parser.add_argument(
        "--only", action="append", choices=sorted(CAPABILITIES), default=None,
        help="run only this capability (repeatable; default: all)",
    )
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz",
                        help="kopf liveness endpoint URL (empty to disable)")
    parser.add_argument("--metrics-bind-address", default="",
                        help="serve /metrics (cluster_autoscaler_*, mapi_*, descheduler_*, "
                             "process and Python metrics), /healthz and /readyz on HOST:PORT "
                             "over plain HTTP, without authentication (default: off; "
                             "--secure-port serves them over HTTPS with it)")
    parser.add_argument("--autoscaler-namespace", default="", metavar="NAMESPACE",
                        help="the operator's namespace, the only one the autoscaler's Priority "
                             "expander reads its ConfigMap cluster-autoscaler-priority-expander "
                             "from (upstream's --namespace; default: $POD_NAMESPACE, else "
                             "berthmaster)")
    parser.add_argument("--kube-api-qps", type=float, default=DEFAULT_QPS, metavar="QPS",
                        help="requests a second to the API server, as kube components' flag "
                             "(client-go's token bucket; default: kube-controller-manager's "
                             f"{DEFAULT_QPS:g}; 0 for no limit)")
    parser.add_argument("--kube-api-burst", type=int, default=DEFAULT_BURST, metavar="BURST",
                        help="requests allowed at once above --kube-api-qps (default: "
                             f"kube-controller-manager's {DEFAULT_BURST})")
    parser.add_argument("--standalone", action="store_true",
                        help="do not use kopf's peering (a single operator replica)")
    add_secure_serving_arguments(parser)
    logs.add_log_format(parser)
    add_verbosity(parser)


def load_capabilities(only: list[str] | None) -> list[str]:
    """Import the handler modules, returning the names of the capabilities now registered."""
    loaded = []
    for name, modules in CAPABILITIES.items():
        if only and name not in only:
            continue
        for module in modules:
            importlib.import_module(module)
        loaded.append(name)
    return loaded


async def preflight(kubeconfig: str | None, capabilities: list[str] | None = None,
                    explicit: bool = False, namespaces: list[str] | None = None) -> None:
    """Load the kubeconfig (or in-cluster config) and reach the API server once, as every
    command does, before kopf starts: kopf itself retries a missing or broken configuration
    forever; then check that the capabilities' custom resources are served and their verbs
    allowed (operator/preflight.py). Raises :class:`~berthmaster.foundation.errors.CommandError`
    (one
    line, exit 2 or 3)."""
    from berthmaster.foundation.kube import KubeClient
    from berthmaster.operator.client import AGENT
    from berthmaster.operator.preflight import preflight_capabilities

    client = await KubeClient.connect(kubeconfig, agent=AGENT)
    try:
        await preflight_capabilities(client, capabilities or [], explicit, namespaces or ())
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    if args.kubeconfig:
        # Before kopf is imported: it reads $KUBECONFIG at import time. kubernetes_asyncio's
        # loader, whose default kopf's login uses, read it when berthmaster.foundation.kube
        # (imported above)
        # loaded it: point its default at the flag's file too.
        os.environ["KUBECONFIG"] = args.kubeconfig
        from kubernetes_asyncio.config import kube_config

        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = args.kubeconfig
    # One handler on the root logger: kopf's own loggers (kopf.objects, kopf.activities, ...)
    # write the same lines as ours (kopf.configure is not called; kopf.run configures nothing).
    logs.configure("operator", args.log_format, args.verbosity)
    if args.kube_api_qps > 0 and args.kube_api_burst < 1:
        raise SystemExit(f"berthmaster operator: --kube-api-burst {args.kube_api_burst}: must be "
                         "at least 1 when --kube-api-qps is above 0 (kube components' rule)")
    from berthmaster.operator import client as shared_client

    shared_client.configure(args.kube_api_qps, args.kube_api_burst)
    secure = SecureServing.from_args(args)  # a bad flag ends the command before kopf starts
    asyncio.run(preflight(args.kubeconfig, [c for c in CAPABILITIES
                                            if not args.only or c in args.only],
                          explicit=bool(args.only), namespaces=args.namespace))
    import kopf

    from berthmaster.operator.health import HealthServer, Readiness

    readiness = Readiness()
    if args.metrics_bind_address or secure is not None:
        server = HealthServer(args.metrics_bind_address, readiness, secure, args.kubeconfig)
        kopf.on.startup()(server.start)
        kopf.on.cleanup()(server.stop)
    loaded = load_capabilities(args.only)
    if "autoscaler" in loaded:
        from berthmaster.operator.autoscaler import handlers as autoscaler_handlers

        autoscaler_handlers.configure(args.autoscaler_namespace)
    logging.getLogger("berthmaster.operator").info("capabilities: %s", ", ".join(loaded))

    kopf.on.login()(shared_client.login)

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Explicit watch timeouts: a silently stalled watch is the classic operator hang.
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.connect_timeout = 30
        settings.posting.level = logging.INFO
        settings.persistence.finalizer = "berthmaster.io/operator"

    kopf.run(
        clusterwide=not args.namespace,
        namespaces=args.namespace or (),
        standalone=args.standalone,
        liveness_endpoint=args.liveness or None,
        ready_flag=readiness.started,
    )
    return 0
