"""What the campaign's TCP proxies share (:mod:`.slowproxy`, :mod:`.rrproxy`): listening on a
free port of 127.0.0.1, closing, and copying one direction of a connection chunk by chunk.
Each proxy decides where a connection goes (its ``_serve``) and whether a chunk waits (the
``hold`` it gives :func:`pipe`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

CHUNK = 64 * 1024


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               hold: Callable[[], Awaitable[None]] | None = None) -> None:
    """Copy ``reader`` to ``writer`` until either end goes, then close ``writer``; ``hold``
    is awaited before each chunk is written on."""
    try:
        while data := await reader.read(CHUNK):
            if hold is not None:
                await hold()
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


class Listening:
    """start/port/close for a proxy holding ``server`` and serving connections with
    ``_serve``."""

    server: asyncio.Server | None

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def start(self) -> int:
        """Listen on a free port of 127.0.0.1; returns the port."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.port

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)
