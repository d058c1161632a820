"""The HTTPS endpoints: ``POST /mutate``, ``POST /validate``, ``POST /scheduler-name``, ``GET
/healthz``; bounded work.

Why not kopf's admission support: the webhook is a service of its own (``berthmaster
admission``, several replicas), with a certificate every replica shares, configurations the chart
owns and our choice of rules, namespaces, failurePolicy and reinvocation. aiohttp (already our
client's HTTP library) serves the two endpoints; the TLS context is replaced in place on
rotation, so connections already open finish on the old certificate and new handshakes get the
new one.

What one review may cost, in the order a request meets the limits (options.Limits):

1. a client certificate, when ``--client-ca-file`` asks for one (checked after the handshake,
   so probes without one still reach /healthz): none -> 401 before anything is read;
2. a slot among ``max_in_flight``: an excess request waits ``queue_wait_seconds`` at most and
   is then answered 429 with a Status, unread. kube-apiserver treats any non-200 answer as a
   failed call (k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go), so its
   ``failurePolicy`` decides: Ignore admits, Fail refuses naming this webhook. Nothing queues
   without bound, and a slot also bounds memory (a body is read only inside one);
3. bytes of the budget of ``max_in_flight_bytes`` (budget.py), the sum of the bodies being
   worked on: a declared ``Content-Length`` is reserved before anything is read, a chunked
   body reserves each chunk as it arrives; a reservation that does not fit is answered 429 at
   once, as the excess over ``max_in_flight`` is, so a burst of large reviews cannot take more
   memory than the chart allows;
4. the body, read in chunks up to ``max_request_bytes`` within ``read_timeout_seconds``: a
   declared or actual size above the limit stops the reading at once. When the bytes read so
   far show an AdmissionReview's ``request.uid`` (kube-apiserver writes it first), the review is
   denied in-band with a 413 Status naming the limit; otherwise the answer is HTTP 413. The
   answer goes out at once; whatever of the body still arrives is discarded unparsed for at
   most ``LINGER_SECONDS`` and the connection is then closed (closing a socket with unread
   data resets it, and the peer could lose the answer before reading it);
5. the decision itself (webhook.py), linear in the pod's tolerations and capped by
   ``max_tolerations``, quick enough to run on the event loop (a 6 MiB review, an UPDATE of a
   pod at kube-apiserver's request limit, parses in about 20 milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from berthmaster.operator.admission import review, schedulername
from berthmaster.operator.admission.budget import ByteBudget, Reservation
from berthmaster.operator.admission.metrics import AdmissionMetrics
from berthmaster.operator.admission.options import Limits

Answer = Callable[[str, Any], Awaitable[dict[str, Any]]]
PREFIX_BYTES = 4096  # enough of a body to find its request.uid
CHUNK_BYTES = 64 * 1024
LINGER_SECONDS = 2.0
_UID = re.compile(rb'"request"\s*:\s*\{\s*"uid"\s*:\s*"([0-9A-Za-z._-]{1,128})"')


def tls_context(cert_pem: str, key_pem: str, scratch: Path,
                client_ca_file: str = "") -> ssl.SSLContext:
    """A server context with our certificate. With ``client_ca_file``, a client certificate
    is asked for and, when presented, must chain to that CA and to nothing else (not the
    system's trust store, which create_default_context would load)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if client_ca_file:
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cafile=client_ca_file)
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


def status(code: int, reason: str, message: str) -> web.Response:
    """A non-200 answer as a metav1 Status, which kube-apiserver's client reads into the
    error it reports ("failed calling webhook ...: <message>")."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")


def review_uid(prefix: bytes) -> str | None:
    """The ``request.uid`` at the start of an AdmissionReview body, if it is one."""
    match = _UID.search(prefix)
    return match.group(1).decode() if match else None


def too_large_message(limit: int, declared: int | None) -> str:
    size = f" {declared} bytes," if declared is not None else ""
    return (f"the admission review is{size} over the {limit}-byte limit of berthmaster "
            "placement admission (berthmaster admission --max-request-bytes; chart value "
            "admission.maxRequestBytes); make the object smaller or raise the limit")


def over_budget_message(budget: ByteBudget) -> str:
    return (f"berthmaster placement admission is holding {budget.reserved} of its "
            f"{budget.limit} bytes of reviews (--max-in-flight-bytes; chart value "
            "admission.maxInFlightBytes); the failurePolicy applies to this one")


class OverBudget(Exception):
    """A chunked body's next chunk does not fit in the budget."""


class WebhookServer:
    def __init__(self, answer: Answer, host: str, port: int, context: ssl.SSLContext,
                 limits: Limits | None = None, metrics: AdmissionMetrics | None = None,
                 require_client_cert: bool = False):
        self._answer = answer
        self.host, self.port = host, port
        self.context = context
        self._limits = limits = limits or Limits()
        self._metrics = metrics or AdmissionMetrics()
        self._require_client_cert = require_client_cert
        self._slots = asyncio.Semaphore(limits.max_in_flight)
        self._budget = ByteBudget(limits.max_in_flight_bytes)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=self._limits.max_request_bytes)
        app.router.add_post("/mutate", self._review)
        app.router.add_post("/validate", self._review)
        app.router.add_post(schedulername.PATH, self._review)
        app.router.add_get("/healthz", self._healthz)
        # A body left unread (too large) is discarded for LINGER_SECONDS after the answer,
        # then the connection closes.
        self._runner = web.AppRunner(app, access_log=None, lingering_time=LINGER_SECONDS)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.context)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _acquire(self) -> bool:
        try:
            await asyncio.wait_for(self._slots.acquire(), self._limits.queue_wait_seconds)
        except TimeoutError:
            return False
        return True

    async def _review(self, request: web.Request) -> web.Response:
        path = request.path
        if self._require_client_cert and not _peer_certificate(request):
            self._metrics.count(path, "unauthenticated")
            return status(401, "Unauthorized", "berthmaster placement admission requires a "
                          "client certificate signed by its --client-ca-file (the API "
                          "server's AdmissionConfiguration kubeConfigFile; docs/admission.md)")
        if not await self._acquire():
            self._metrics.count(path, "overloaded")
            return status(429, "TooManyRequests", f"berthmaster placement admission is working "
                          f"on {self._limits.max_in_flight} reviews (--max-in-flight); the "
                          "failurePolicy applies to this one")
        self._metrics.in_flight.inc()
        try:
            return await self._within_slot(request, path)
        finally:
            self._metrics.in_flight.dec()
            self._slots.release()

    async def _within_slot(self, request: web.Request, path: str) -> web.Response:
        held = Reservation(self._budget)
        declared = request.content_length
        try:
            if (declared is not None and declared <= self._limits.max_request_bytes
                    and not held.take(declared)):
                raise OverBudget
            return await self._within_budget(request, path, held)
        except OverBudget:
            self._metrics.count(path, "overloaded")
            return status(429, "TooManyRequests", over_budget_message(self._budget))
        finally:
            held.release()

    async def _within_budget(self, request: web.Request, path: str,
                             held: Reservation) -> web.Response:
        try:
            async with asyncio.timeout(self._limits.read_timeout_seconds):
                body, complete = await self._read(request, held)
        except TimeoutError:
            self._metrics.count(path, "bad_request")
            return status(408, "Timeout", "the request body did not arrive within "
                          f"{self._limits.read_timeout_seconds:g} seconds")
        if not complete:
            self._metrics.count(path, "too_large")
            message = too_large_message(self._limits.max_request_bytes, request.content_length)
            uid = review_uid(body)
            if uid is None:
                return status(413, "RequestEntityTooLarge", message)
            return _json(review.deny(uid, message, code=413))
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._metrics.count(path, "bad_request")
            return status(400, "BadRequest", "expected an admission.k8s.io/v1 AdmissionReview "
                          "in JSON")
        return _json(await self._answer(path, parsed))

    async def _read(self, request: web.Request, held: Reservation) -> tuple[bytes, bool]:
        """(the body, True), or (its first bytes, False) when it is over the limit;
        OverBudget when a chunk of a body of undeclared length does not fit in the budget."""
        limit = self._limits.max_request_bytes
        declared = request.content_length
        if declared is not None and declared > limit:
            return await _read_at_most(request, PREFIX_BYTES), False
        chunks: list[bytes] = []
        size = 0
        while chunk := await request.content.read(CHUNK_BYTES):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                return b"".join(chunks)[:PREFIX_BYTES], False
            if declared is None and not held.take(len(chunk)):
                raise OverBudget
        return b"".join(chunks), True

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")


async def _read_at_most(request: web.Request, size: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < size and (chunk := await request.content.read(size - got)):
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _peer_certificate(request: web.Request) -> bool:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    return ssl_object is not None and ssl_object.getpeercert(binary_form=True) is not None


def _json(answer: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(answer), content_type="application/json")
