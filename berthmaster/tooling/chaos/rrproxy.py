"""A round-robin TCP proxy in front of the admission webhook's replicas: the campaign's own
stand-in for a Service and kube-proxy.

The webhook configurations name the proxy's address; each connection the API server opens goes
to the next replica in turn (:func:`rotation`), and when that replica refuses the connection
(killed, not yet restarted) to the one after it, as kube-proxy stops sending to an endpoint
that is not ready. The API server speaks HTTP/2 to webhooks and keeps a connection for many
reviews, so the turn is per connection, not per review. TLS passes through untouched: every
replica serves the same certificate, for 127.0.0.1. A connection open to a replica that dies
is closed with it; the API server then applies the configurations' ``failurePolicy``. It runs
in the campaign's event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from berthmaster.tooling.chaos.tcpproxy import Listening, pipe


def rotation(backends: int, turn: int) -> list[int]:
    """The order in which connection number ``turn`` tries the ``backends``: the next one in
    turn first, then the others in order (round robin with fail-over)."""
    if backends < 1:
        return []
    first = turn % backends
    return [(first + step) % backends for step in range(backends)]


@dataclass
class RoundRobinProxy(Listening):
    backends: list[tuple[str, int]]
    turn: int = 0
    served: dict[int, int] = field(default_factory=dict)  # backend index -> connections
    refused: dict[int, int] = field(default_factory=dict)  # backend index -> refused tries
    dropped: int = 0  # connections no backend took
    open: dict[int, int] = field(default_factory=dict)  # backend index -> connections open now
    server: asyncio.Server | None = field(default=None, repr=False)

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        order = rotation(len(self.backends), self.turn)
        self.turn += 1
        for index in order:
            host, port = self.backends[index]
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
            except OSError:
                self.refused[index] = self.refused.get(index, 0) + 1
                continue
            self.served[index] = self.served.get(index, 0) + 1
            self.open[index] = self.open.get(index, 0) + 1
            try:
                await asyncio.gather(pipe(client_reader, upstream_writer),
                                     pipe(upstream_reader, client_writer),
                                     return_exceptions=True)
            finally:
                self.open[index] -= 1
            return
        self.dropped += 1
        client_writer.close()

