"""The operator's one API client, shared by every capability, opened and closed one way.

Opening: kopf runs all handlers in one event loop, which has not started when the handler
modules are imported, so :func:`operator_client` opens the client lazily in that loop on first
use, under a lock so that concurrent handlers (or two capabilities' startup handlers) open it
once. Every capability calls it: the thin kopf handlers of ``deschedulers`` and ``autoscaler``
per call, the ``machines`` and ``machinehealthchecks`` capabilities once, at startup, for the
controllers behind their work queues. (The
command's preflights run before kopf, in an event loop of their own: they only probe the API
server with a client they close at once.)

Rate: the client is limited as a kube component's (``--kube-api-qps``, ``--kube-api-burst``;
client-go's token bucket, :class:`~berthmaster.foundation.kube.TokenBucket`), by default as
kube-controller-manager's clients (pkg/controller/apis/config/v1alpha1/defaults.go: QPS 20,
burst 30): a MachineSet of a hundred thousand replicas creates its Machines at that pace, and the
other capabilities' requests take their turn in the same bucket (:func:`configure`, before
the first use).

Closing: a capability whose workers use the client past a handler's return (a work queue)
registers its stop coroutine with :func:`stop_before_close`. The one
cleanup handler here awaits those stops first, in registration order, and only then closes the
client, so no worker is left holding a closed client. No capability closes the client itself.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import kopf

from berthmaster.foundation.kube import (
    CONTROLLER_MANAGER_BURST,
    CONTROLLER_MANAGER_QPS,
    KubeClient,
    user_agent,
)

Stop = Callable[[], Awaitable[None]]
# The User-Agent of every request of the operator, its own clients' and kopf's (:func:`login`).
AGENT = user_agent("berthmaster-operator")
DEFAULT_QPS = CONTROLLER_MANAGER_QPS
DEFAULT_BURST = CONTROLLER_MANAGER_BURST


class SharedClient:
    """The client, the lock that opens it once, and what to stop before it is closed."""

    def __init__(self, connect: Callable[[], Awaitable[KubeClient]] | None = None):
        self.qps = DEFAULT_QPS
        self.burst = DEFAULT_BURST
        self._connect = connect or (
            lambda: KubeClient.connect(os.environ.get("KUBECONFIG") or None, qps=self.qps,
                                       burst=self.burst, agent=AGENT))
        self._client: KubeClient | None = None
        self._lock: asyncio.Lock | None = None
        self._stops: list[Stop] = []

    async def get(self) -> KubeClient:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is None:
                self._client = await self._connect()
            return self._client

    def stop_before_close(self, stop: Stop) -> None:
        self._stops.append(stop)

    async def close(self) -> None:
        """Stop every registered user, then close the client (a no-op if it never opened)."""
        stops, self._stops = self._stops, []
        try:
            for stop in stops:
                await stop()
        finally:
            client, self._client, self._lock = self._client, None, None
            if client is not None:
                await client.close()


SHARED = SharedClient()


async def operator_client() -> KubeClient:
    """The operator's client, opened on first use."""
    return await SHARED.get()


def configure(qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST) -> None:
    """The shared client's rate (``--kube-api-qps``/``--kube-api-burst``), before first use; a
    qps of 0 or less lifts the limit."""
    SHARED.qps, SHARED.burst = qps, burst


def stop_before_close(stop: Stop) -> None:
    """Have the cleanup await ``stop`` before it closes the client."""
    SHARED.stop_before_close(stop)


@kopf.on.cleanup()
async def close_operator_client(**_: Any) -> None:
    await SHARED.close()


async def login(**kwargs: Any) -> kopf.AiohttpSession | None:
    """kopf's own login, in a session that names berthmaster: kopf's default activity
    (``login_via_async_client``: in-cluster, then the kubeconfig, through kubernetes_asyncio)
    finds the credentials, and the session kopf then uses sends :data:`AGENT` as its
    User-Agent, as every kube component names itself (client-go ``rest.DefaultKubernetesUserAgent``)
    instead of kopf's ``kopf/<version>``. The API server also takes that name as the field
    manager of kopf's writes (apiserver ``pkg/endpoints/handlers/rest.go``,
    ``prefixFromUserAgent``). The session is made as kopf makes its own
    (kopf ``_cogs/clients/auth.py``, ``APIContext``)."""
    info = await kopf.login_via_async_client(**kwargs)
    if info is None:
        return None
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context()),
        headers={**info.as_http_headers(), "User-Agent": AGENT},
        proxy=info.proxy_url, trust_env=info.trust_env)
    return kopf.AiohttpSession(server=info.server, default_namespace=info.default_namespace,
                               priority=info.priority, expiration=info.expiration,
                               aiohttp_session=session)
