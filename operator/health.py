"""The operator's ``/metrics``, ``/healthz`` and ``/readyz`` (``--metrics-bind-address``, and
``--secure-port`` for HTTPS with delegated authentication and authorization).

Design: the same server as the scheduler's (berthmaster.foundation.serving), started in kopf's
event loop
by a startup handler and stopped by a cleanup handler. ``/metrics`` exposes prometheus_client's
default registry: the capabilities' collectors (``cluster_autoscaler_*``, ``mapi_*``,
``descheduler_*``) and the process and Python runtime collectors it carries by default.

``/readyz`` answers 200 once the operator is connected and running its handlers:

- kopf's startup handlers have finished (kopf raises its ready flag after them; every
  capability's runtime is made there), and
- the API server answered the last check, made every ``CHECK_SECONDS`` through the operator's
  shared client (one GET /version: connected, and the credentials still accepted).

kopf keeps its watch state to itself (it has no public "listed" signal), so "caches synced" is
kopf's own ordering: it starts its watches only after the startup handlers; the operator's
own caches, made in those handlers, are part of the first condition. Each capability's
runtime adds a condition of its own (:func:`set_check`, operator/capability.py): e.g. the
autoscaler's watch caches are not ready while an informer that was restarted after a failure
has not listed again. ``/healthz`` answers 200
while the process serves (kopf's own liveness endpoint, ``--liveness``, stays as it was).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from prometheus_client import REGISTRY, generate_latest

from berthmaster.foundation.build_info import register_build_info
from berthmaster.foundation.errors import CommandError
from berthmaster.foundation.kube import KubeError
from berthmaster.foundation.serving import Probe, SecureServing, Served, serve

log = logging.getLogger("berthmaster.operator.health")
# The operator serves the default registry; berthmaster_build_info joins it as the scheduler's
# (berthmaster.foundation.build_info).
register_build_info(REGISTRY)

CHECK_SECONDS = 10.0

_named: dict[str, Probe] = {}


def set_check(name: str, probe: Probe) -> None:
    """Have ``/readyz`` ask ``probe`` as the condition ``name`` (a capability's runtime,
    operator/capability.py); a second call for ``name`` replaces the first."""
    _named[name] = probe


class Readiness:
    """What ``/readyz`` reports; ``started`` is kopf's ready flag."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.api_problem: str | None = "the API server has not been checked yet"

    def __call__(self) -> tuple[bool, str]:
        if not self.started.is_set():
            return False, "kopf's startup handlers have not finished"
        if self.api_problem is not None:
            return False, self.api_problem
        for probe in _named.values():
            ok, detail = probe()
            if not ok:
                return False, detail
        return True, "ok"

    async def check_api(self) -> None:
        from berthmaster.operator.client import operator_client

        try:
            client = await operator_client()
            await client.check_reachable(attempts=1)
        except (CommandError, KubeError, OSError) as error:
            if self.api_problem is None:
                log.warning("not ready: %s", error)
            self.api_problem = str(error)
            return
        if self.api_problem is not None and self.started.is_set():
            log.info("ready: connected to the API server")
        self.api_problem = None

    async def keep_checking(self) -> None:
        while True:
            await self.check_api()
            await asyncio.sleep(CHECK_SECONDS)


class HealthServer:
    def __init__(self, address: str, readiness: Readiness, secure: SecureServing | None = None,
                 kubeconfig: str | None = None):
        self.address = address
        self.readiness = readiness
        self.secure = secure
        self.kubeconfig = kubeconfig
        self._runner: Served | None = None
        self._checking: asyncio.Task[None] | None = None

    async def start(self, **_: Any) -> None:
        self._runner = await serve(lambda: generate_latest(REGISTRY), self.address,
                                   lambda: (True, "ok"), self.readiness, self.secure,
                                   self.kubeconfig)
        self._checking = asyncio.create_task(self.readiness.keep_checking(),
                                             name="readiness-check")

    async def stop(self, **_: Any) -> None:
        if self._checking is not None:
            self._checking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checking
        if self._runner is not None:
            await self._runner.cleanup()
