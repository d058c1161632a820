"""A TCP proxy in front of kube-apiserver that can turn slow: the ``apiserver-slow`` fault.

One scheduler replica's kubeconfig names the proxy instead of the API server (TLS passes
through untouched: the serving certificate is for 127.0.0.1, whatever the port). While
``delay`` is above zero every chunk read from either side waits that long before it is
written on, so requests, responses, watch events and Lease renewals all arrive late, as over a
congested network or to an overloaded API server. Each direction of a connection is one
coroutine, so order within a connection is kept. It runs in the campaign's event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from berthmaster.tooling.chaos.tcpproxy import Listening, pipe


@dataclass
class SlowProxy(Listening):
    upstream_host: str
    upstream_port: int
    delay: float = 0.0  # seconds each chunk waits; 0: a plain proxy
    delayed: int = 0  # chunks delayed so far (the fault's evidence that it acted)
    connections: int = 0
    server: asyncio.Server | None = field(default=None, repr=False)

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port)
        except OSError:
            client_writer.close()  # the API server is down: the client retries
            return
        self.connections += 1
        await asyncio.gather(pipe(client_reader, upstream_writer, self._hold),
                             pipe(upstream_reader, client_writer, self._hold),
                             return_exceptions=True)

    async def _hold(self) -> None:
        if self.delay > 0:
            self.delayed += 1
            await asyncio.sleep(self.delay)
