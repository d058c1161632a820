"""The admission service: start the webhook, keep it current, stop it.

Design: ``berthmaster admission`` (command.py) runs :class:`AdmissionService` in its own event
loop, apart from the operator, so neither can stall the other and any number of replicas can
serve (they share nothing but the certificate and the ConfigMap, both read-only to them).

Start, in this order: read the configuration ConfigMap, load the serving certificate (from
``--webhook-cert-file``/``--webhook-key-file``, or, self-managed, bring the Secret up to date,
creating it the first time), start the HTTPS server, and, self-managed only, write both
configurations pointing at the listen address with the Secret's CA. One background task then
repeats every ``BERTHMASTER_ADMISSION_CHECK_SECONDS`` (60 s): reload the configuration (an
invalid one is logged with every problem and the last good one kept), reload the certificate
when its files changed (kubelet swaps a mounted Secret's files atomically) or, self-managed,
reconcile the Secret (certs.reconcile: a rotation is stored first, then the server's TLS context
is reloaded, then the configurations are re-applied whole). :meth:`AdmissionService.stop`
cancels the task and stops the server; the configurations stay registered, as the
administrator's policy (docs/admission.md says how to remove them).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import shutil
import ssl
import tempfile
from pathlib import Path
from typing import Any

from berthmaster.foundation.access import Access, Needs, check
from berthmaster.foundation.errors import ConfigurationError
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.admission import certs, registration
from berthmaster.operator.admission.access import BindingAccess
from berthmaster.operator.admission.config import (
    CONFIG_KEY,
    AdmissionConfig,
    AdmissionConfigError,
    parse_text,
)
from berthmaster.operator.admission.metrics import AdmissionMetrics
from berthmaster.operator.admission.options import AdmissionSettings
from berthmaster.operator.admission.server import WebhookServer, load_chain, tls_context
from berthmaster.operator.admission.webhook import PlacementWebhook

_log = logging.getLogger("berthmaster.operator.admission")


async def read_config(client: KubeClient, settings: AdmissionSettings) -> AdmissionConfig:
    """The ConfigMap's configuration; the defaults when it does not exist."""
    source = f"ConfigMap {settings.namespace}/{settings.config_map} key {CONFIG_KEY}"
    try:
        config_map = await client.get(resource_path(CORE, "configmaps", settings.namespace,
                                                     settings.config_map))
    except KubeError as error:
        if error.not_found:
            return AdmissionConfig()
        raise
    return parse_text((config_map.get("data") or {}).get(CONFIG_KEY) or "", source)


RBAC_FIX = ("grant the admission ServiceAccount its rules (the Helm chart with "
            "admission.enabled, templates/admission-rbac.yaml; docs/admission.md)")


def needs(settings: AdmissionSettings) -> Needs:
    """What the webhook cannot work without, for these flags: reads only, unless it manages
    its own certificate and configurations."""
    ns, group = settings.namespace, "admissionregistration.k8s.io"
    access = [Access("create", "subjectaccessreviews", "authorization.k8s.io"),
              Access("get", "namespaces"), Access("get", "nodes"),
              Access("get", "configmaps", "", ns, settings.config_map)]
    if settings.self_managed:
        access += [Access("create", "secrets", "", ns),
                   Access("get", "secrets", "", ns, settings.secret),
                   Access("update", "secrets", "", ns, settings.secret)]
        access += [Access("patch", plural, group, name=settings.name)
                   for plural in (registration.MUTATING, registration.VALIDATING)]
    return Needs("admission", (), tuple(access))


async def preflight(client: KubeClient, settings: AdmissionSettings) -> None:
    """Refuse to start without the access it needs or with an invalid configuration (exit 2,
    one line naming what is refused, or every problem of the configuration)."""
    try:
        await check(client, [needs(settings)], "", RBAC_FIX)
        await read_config(client, settings)
    except AdmissionConfigError as error:
        raise ConfigurationError(f"{error}\nfix the ConfigMap (docs/admission.md)") from error


def _decode(secret: dict[str, Any]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode()
            for key, value in (secret.get("data") or {}).items()}


def _encode(data: dict[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


def _read_pair(settings: AdmissionSettings) -> tuple[str, str]:
    try:
        return (Path(settings.tls_cert_file).read_text(),
                Path(settings.tls_key_file).read_text())
    except OSError as error:
        raise ConfigurationError(f"cannot read --webhook-cert-file/--webhook-key-file: {error}; "
                                 "mount the certificate Secret (docs/admission.md)") from error


class AdmissionService:
    def __init__(self, client: KubeClient, settings: AdmissionSettings,
                 metrics: AdmissionMetrics | None = None):
        self.client = client
        self.settings = settings
        self.metrics = metrics or AdmissionMetrics()
        self.scratch = Path(tempfile.mkdtemp(prefix="berthmaster-admission-"))
        self.data: dict[str, str] = {}  # the Secret's keys, or tls.crt/tls.key from files
        self.webhook: PlacementWebhook | None = None
        self.server: WebhookServer | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def serving(self) -> bool:
        return self.server is not None

    async def start(self) -> None:
        settings = self.settings
        if settings.self_managed:
            await self.ensure_namespace()
        config = await read_config(self.client, settings)
        await self.load_certificate()
        self.webhook = PlacementWebhook(
            self.client, config, BindingAccess(self.client), settings.failure_policy,
            settings.timeout_seconds, settings.limits.max_tolerations, self.metrics,
            scheduler_name=settings.scheduler_name)
        server = WebhookServer(
            self.webhook.answer, settings.host, settings.port,
            tls_context(self.data[certs.TLS_CERT], self.data[certs.TLS_KEY], self.scratch,
                        settings.client_ca_file),
            settings.limits, self.metrics, require_client_cert=bool(settings.client_ca_file))
        await server.start()
        self.server = server
        await self.publish()
        _log.info("placement admission webhook serving on %s (configurations %s)",
                  settings.url, settings.name)
        self.task = asyncio.create_task(self.maintain())

    async def ensure_namespace(self) -> None:
        """Outside a cluster the Secret's namespace may not exist yet: make it."""
        try:
            await self.client.get(resource_path(CORE, "namespaces",
                                                name=self.settings.namespace))
            return
        except KubeError as error:
            if not error.not_found:
                raise
        try:
            await self.client.create(resource_path(CORE, "namespaces"), {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.settings.namespace}})
        except KubeError as error:
            if not error.conflict:
                raise

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.server is not None:
            await self.server.stop()
            self.server = None
        shutil.rmtree(self.scratch, ignore_errors=True)

    async def maintain(self) -> None:
        while True:
            await asyncio.sleep(self.settings.check_seconds)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("placement admission upkeep failed; retrying in %.0f s",
                               self.settings.check_seconds)

    async def tick(self) -> None:
        assert self.webhook is not None and self.server is not None
        try:
            self.webhook.config = await read_config(self.client, self.settings)
        except AdmissionConfigError as error:
            _log.error("%s; keeping the previous configuration", error)
        before = self.data
        await self.load_certificate()
        if self.data.get(certs.TLS_CERT) != before.get(certs.TLS_CERT):
            try:
                load_chain(self.server.context, self.data[certs.TLS_CERT],
                           self.data[certs.TLS_KEY], self.scratch)
            except (ssl.SSLError, OSError):
                # A pair read mid-swap (files) does not match: the next tick tries again.
                self.data = before
                raise
            _log.info("placement admission webhook: serving certificate rotated")
        await self.publish()

    async def load_certificate(self) -> None:
        if self.settings.self_managed:
            await self.reconcile_certificate()
        else:
            cert, key = _read_pair(self.settings)
            self.data = {certs.TLS_CERT: cert, certs.TLS_KEY: key}

    async def reconcile_certificate(self) -> None:
        """Bring the Secret up to date and remember what it holds."""
        path = resource_path(CORE, "secrets", self.settings.namespace, self.settings.secret)
        try:
            secret: dict[str, Any] | None = await self.client.get(path)
        except KubeError as error:
            if not error.not_found:
                raise
            secret = None
        current = _decode(secret) if secret else None
        wanted = certs.reconcile(current, self.settings.hosts(),
                                 datetime.datetime.now(datetime.UTC), self.settings.lifetimes)
        if wanted == current:
            self.data = wanted
            return
        metadata: dict[str, Any] = {
            "name": self.settings.secret, "namespace": self.settings.namespace,
            "labels": {"app.kubernetes.io/name": "berthmaster",
                       "app.kubernetes.io/component": "admission"}}
        body = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": metadata, "data": _encode(wanted)}
        if secret is None:
            await self.client.create(resource_path(CORE, "secrets", self.settings.namespace),
                                     body)
        else:
            metadata["resourceVersion"] = secret["metadata"]["resourceVersion"]
            await self.client.replace(path, body)  # a conflict: the next tick starts over
        self.data = wanted

    async def publish(self) -> None:
        """Self-managed: the whole configurations, every time (an edit or deletion is
        undone). With certificate files the configurations are the chart's."""
        if not self.settings.self_managed:
            return
        target = registration.Target(url=self.settings.url)
        await registration.apply_configurations(
            self.client, registration.build_configurations(
                self.settings.name, target, self.data[certs.CA_CERT], self.settings.namespace,
                self.settings.failure_policy, self.settings.timeout_seconds,
                scheduler_name=self.settings.scheduler_name))
