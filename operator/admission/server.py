"""The HTTPS endpoints: ``POST /mutate``, ``POST /validate``, ``GET /healthz``.

Why not kopf's admission support (``kopf.on.mutate``/``kopf.on.validate`` with a
``WebhookServer``): kopf makes its own certificate when it starts (or reads fixed files) and
manages the webhook configurations itself from its handlers. We need a certificate that
survives restarts in a Secret, is rotated while serving, and a CA injected into configurations
the chart owns, with our own choice of rules, namespaces, failurePolicy and reinvocation.
aiohttp (already kopf's and our client's HTTP library) serves the two endpoints in a few lines
in the operator's event loop; the TLS context is replaced in place on rotation, so connections
already open finish on the old certificate and new handshakes get the new one.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

Answer = Callable[[str, Any], Awaitable[dict[str, Any]]]


def tls_context(cert_pem: str, key_pem: str, scratch: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load_chain(context, cert_pem, key_pem, scratch)
    return context


def load_chain(context: ssl.SSLContext, cert_pem: str, key_pem: str, scratch: Path) -> None:
    """Load a certificate and key into ``context`` (ssl reads only files: private ones in a
    scratch directory, removed at once)."""
    handle, name = tempfile.mkstemp(dir=scratch, suffix=".pem")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(cert_pem + key_pem)
        context.load_cert_chain(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


class WebhookServer:
    def __init__(self, answer: Answer, host: str, port: int, context: ssl.SSLContext):
        self._answer = answer
        self.host, self.port = host, port
        self.context = context
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/mutate", self._review)
        app.router.add_post("/validate", self._review)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.context)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _review(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return web.Response(status=400, text="expected an AdmissionReview in JSON")
        answer = await self._answer(request.path, body)
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")
