"""The components' endpoints: ``/metrics``, ``/healthz`` and ``/readyz``, plain or secure.

Design: the scheduler and the operator serve the same three paths, with aiohttp (already the
API client's transport) in the component's own event loop: ``/metrics`` is the Prometheus text
exposition of the component's registry, ``/healthz`` says the process works and ``/readyz`` that
it is connected and its caches are synced; each probe answers 200 ``ok`` or 500 with the reason.
Every registry also carries the process and runtime collectors
(:func:`register_runtime_collectors`).

They are served in one or both of two ways (docs/observability.md):

- plain HTTP on ``--metrics-bind-address`` (``HOST:PORT``; empty turns it off), for development
  and tests, where nobody else can reach the address;
- as kube-scheduler serves them (k8s.io/apiserver ``pkg/server/options/serving.go``,
  ``authentication.go``, ``authorization.go``): HTTPS on ``--bind-address``:``--secure-port``
  (0, the default, turns it off), with the certificate of ``--tls-cert-file`` and
  ``--tls-private-key-file`` or, without them, a self-signed one made at start for
  ``localhost``/``127.0.0.1`` as ``MaybeDefaultWithSelfSignedCerts`` does; every request is
  authenticated and authorized by the API server (berthmaster.foundation.delegated_auth), through
  the
  clients of ``--authentication-kubeconfig`` and ``--authorization-kubeconfig`` or, without
  them, the component's own (its ``--kubeconfig``, else the Pod's ServiceAccount).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from berthmaster.foundation.build_info import register_build_info
from berthmaster.foundation.delegated_auth import (
    ANONYMOUS_USER,
    Delegated,
    ReviewFailed,
    bearer_token,
    forbidden_body,
    unauthorized_body,
)
from berthmaster.foundation.errors import ConfigurationError
from berthmaster.foundation.kube import KubeClient, user_agent
from berthmaster.foundation.serving_options import SecureServing

__all__ = ["Probe", "SecureServing", "Served", "serve"]

# Go components export no *_created series; neither do ours (process-wide, before any metric).
disable_created_metrics()  # type: ignore[no-untyped-call]

log = logging.getLogger("berthmaster.foundation.serving")

Probe = Callable[[], tuple[bool, str]]


def register_runtime_collectors(registry: CollectorRegistry) -> None:
    """The process (``process_*``), platform (``python_info``) and garbage-collector
    (``python_gc_*``) collectors on ``registry``: prometheus_client puts them on its default
    registry only, and every component exports them as Go components export ``process_*`` and
    ``go_*``; and ``berthmaster_build_info`` (berthmaster.foundation.build_info), as every
    Kubernetes
    component exports ``kubernetes_build_info``."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    register_build_info(registry)


def self_signed_certificate(host: str = "localhost",
                            addresses: Sequence[str] = ("127.0.0.1",),
                            now: datetime.datetime | None = None) -> tuple[bytes, bytes]:
    """A certificate (PEM, followed by its CA's) and key for ``host`` and ``addresses``, signed
    by a CA made for it, valid for a year: client-go ``util/cert``'s
    GenerateSelfSignedCertKeyWithFixtures, which kube-scheduler uses when given no certificate
    (CN ``<host>-ca@<unix time>`` for the CA, ``<host>@<unix time>`` for the certificate)."""
    now = now or datetime.datetime.now(datetime.UTC)
    stamp = int(now.timestamp())
    valid_from = now - datetime.timedelta(hours=1)  # upstream's allowance for clock skew
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{stamp}")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(valid_from)
          .not_valid_after(valid_from + datetime.timedelta(days=365))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(True, False, True, False, False, True, False, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = [x509.DNSName(host)]
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in addresses]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{stamp}")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid_from)
            .not_valid_after(valid_from + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False,
                                         False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(ca_key, hashes.SHA256()))
    chain = (cert.public_bytes(serialization.Encoding.PEM)
             + ca.public_bytes(serialization.Encoding.PEM))
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    return chain, key_pem


def tls_context(settings: SecureServing) -> ssl.SSLContext:
    """The server's TLS context: TLS 1.2 at least (kube's default minimum), the flags'
    certificate or a self-signed one."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.cert_file:
        try:
            context.load_cert_chain(settings.cert_file, settings.key_file)
        except (OSError, ssl.SSLError) as error:
            raise ConfigurationError(
                f"cannot load --tls-cert-file {settings.cert_file} with --tls-private-key-file "
                f"{settings.key_file} ({error}); give a PEM certificate and its key") from error
        return context
    chain, key = self_signed_certificate()
    # ssl loads certificates from files only; these live for the length of this call
    with tempfile.TemporaryDirectory(prefix="berthmaster-tls-") as folder:
        cert_path, key_path = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        with open(cert_path, "wb") as out:
            out.write(chain)
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
            out.write(key)
        context.load_cert_chain(cert_path, key_path)
    return context


def delegated_middleware(delegated: Delegated) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Authenticate, then authorize, every request before its handler (kube's filter order)."""

    @web.middleware
    async def middleware(request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        token = bearer_token(request.headers.get("Authorization"))
        user = ANONYMOUS_USER
        if token is not None:
            try:
                authenticated = await delegated.authenticate(token)
            except ReviewFailed as error:
                log.warning("cannot authenticate a request: %s", error)
                authenticated = None
            if authenticated is None:
                return web.Response(status=401, body=unauthorized_body(),
                                    content_type="application/json")
            user = authenticated
        verb, path = request.method.lower(), request.path
        try:
            decision = await delegated.authorize(user, verb, path)
        except ReviewFailed as error:
            # responsewriters.InternalError
            return web.Response(status=500, text=f"Internal Server Error: "
                                f"{json.dumps(request.path_qs)}: {error}\n",
                                headers={"X-Content-Type-Options": "nosniff"})
        if not decision.allowed:
            return web.Response(status=403, content_type="application/json",
                                body=forbidden_body(user, verb, path, decision.reason),
                                headers={"X-Content-Type-Options": "nosniff"})
        return await handler(request)

    return middleware


class Served:
    """The running endpoints (plain, secure or both) and the clients the secure one uses."""

    def __init__(self) -> None:
        self.runners: list[web.AppRunner] = []
        self.clients: list[KubeClient] = []

    async def cleanup(self) -> None:
        for runner in self.runners:
            await runner.cleanup()
        for client in self.clients:
            await client.close()


async def _delegated(settings: SecureServing, kubeconfig: str | None,
                     served: Served) -> Delegated:
    """The review clients: the flags' kubeconfigs, else the component's own (one client per
    distinct kubeconfig, closed with ``served``)."""
    agent = user_agent("berthmaster", "delegated-auth")
    clients: dict[str | None, KubeClient] = {}

    async def client(flag: str) -> KubeClient:
        chosen = flag or kubeconfig
        if chosen not in clients:
            clients[chosen] = await KubeClient.connect(chosen, agent=agent)
            served.clients.append(clients[chosen])
        return clients[chosen]

    return Delegated(await client(settings.authentication_kubeconfig),
                     await client(settings.authorization_kubeconfig),
                     settings.always_allow_paths, settings.token_ttl, settings.allowed_ttl,
                     settings.denied_ttl)


def endpoints(exposition: Callable[[], bytes], healthy: Probe, ready: Probe,
              middlewares: Sequence[Callable[..., Awaitable[web.StreamResponse]]] = ()
              ) -> web.Application:
    """The three paths as one aiohttp application."""

    async def metrics_handler(_: web.Request) -> web.Response:
        response = web.Response(body=exposition())
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return response

    def check(probe: Probe) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            ok, detail = probe()
            return web.Response(status=200 if ok else 500, text="ok" if ok else detail)
        return handler

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", check(healthy))
    app.router.add_get("/readyz", check(ready))
    return app


async def serve(exposition: Callable[[], bytes], address: str, healthy: Probe,
                ready: Probe, secure: SecureServing | None = None,
                kubeconfig: str | None = None) -> Served:
    """Serve plain HTTP on ``host:port`` (``:port`` means every interface; empty: not at all)
    and, with ``secure``, HTTPS with delegated authentication and authorization."""
    served = Served()
    try:
        if address:
            runner = web.AppRunner(endpoints(exposition, healthy, ready), access_log=None)
            await runner.setup()
            served.runners.append(runner)
            host, _, port = address.rpartition(":")
            await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
            log.info("serving metrics and health over plain HTTP", extra={"address": address})
        if secure is not None:
            context = tls_context(secure)
            delegated = await _delegated(secure, kubeconfig, served)
            runner = web.AppRunner(endpoints(exposition, healthy, ready,
                                             [delegated_middleware(delegated)]),
                                   access_log=None)
            await runner.setup()
            served.runners.append(runner)
            await web.TCPSite(runner, secure.bind_address, secure.port,
                              ssl_context=context).start()
            log.info("serving metrics and health over HTTPS with delegated authentication",
                     extra={"address": f"{secure.bind_address}:{secure.port}"})
    except BaseException:
        await served.cleanup()
        raise
    return served
