"""The admission capability: start the webhook with the operator, keep it current, stop it.

Design: ``berthmaster operator --admission-listen HOST:PORT`` calls :func:`configure` before
kopf starts; kopf's startup handler then, in the operator's event loop and in this order,
makes its namespace if it writes the configurations itself and the namespace is missing, reads
the configuration ConfigMap, brings the certificate Secret up to date (creating it the
first time), starts the HTTPS server, and publishes the CA (into the chart's configurations
with ``--admission-service``, else by writing both configurations, pointing at the listen
address). One background task then repeats, every ``BERTHMASTER_ADMISSION_CHECK_SECONDS``
(60 s): reload the configuration (an invalid one is logged with every problem and the last
good one kept), reconcile the certificate (certs.reconcile: a rotation is stored first, then
the server's TLS context is reloaded, then the CA bundle published), and publish again (a
``helm upgrade`` may have reset the chart's caBundle; the configurations the operator writes
itself are re-applied whole). The cleanup of the operator's shared client
(:mod:`berthmaster.operator.client`) cancels the task and stops the server before it closes the
client; the configurations stay registered, as the administrator's policy (docs/admission.md
says how to remove them).

Without ``--admission-listen`` the capability is loaded but idle.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import kopf

from berthmaster.access import Access, Needs, check
from berthmaster.errors import ConfigurationError
from berthmaster.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.admission import certs, registration
from berthmaster.operator.admission.access import BindingAccess
from berthmaster.operator.admission.config import (
    CONFIG_KEY,
    AdmissionConfig,
    AdmissionConfigError,
    parse_text,
)
from berthmaster.operator.admission.options import AdmissionSettings
from berthmaster.operator.admission.server import WebhookServer, load_chain, tls_context
from berthmaster.operator.admission.webhook import PlacementWebhook
from berthmaster.operator.client import AGENT, operator_client, stop_before_close

_log = logging.getLogger("berthmaster.operator.admission")


class _State:
    settings: AdmissionSettings | None = None
    runtime: Runtime | None = None


def configure(settings: AdmissionSettings | None) -> None:
    """Called by ``berthmaster operator`` with the flags' settings (None: stay idle)."""
    _State.settings = settings


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


RBAC_FIX = ("grant the operator the admission rules (the Helm chart with admission.enabled, "
            "templates/admission.yaml and operator-rbac.yaml; docs/admission.md)")


def needs(settings: AdmissionSettings) -> Needs:
    """What the webhook cannot work without, for these flags."""
    ns, group = settings.namespace, "admissionregistration.k8s.io"
    access = [Access("create", "subjectaccessreviews", "authorization.k8s.io"),
              Access("get", "namespaces"), Access("get", "nodes"),
              Access("get", "configmaps", "", ns, settings.config_map),
              Access("create", "secrets", "", ns),
              Access("get", "secrets", "", ns, settings.secret),
              Access("update", "secrets", "", ns, settings.secret)]
    for plural in (registration.MUTATING, registration.VALIDATING):
        if settings.service:
            access += [Access("get", plural, group, name=settings.name),
                       Access("update", plural, group, name=settings.name)]
        else:
            access.append(Access("patch", plural, group, name=settings.name))
    return Needs("admission", (), tuple(access))


async def preflight(settings: AdmissionSettings, kubeconfig: str | None) -> None:
    """Refuse to start without the access it needs or with an invalid configuration (exit 2,
    one line naming what is refused, or every problem of the configuration)."""
    client = await KubeClient.connect(kubeconfig, agent=AGENT)
    try:
        await check(client, [needs(settings)], "", RBAC_FIX)
        await read_config(client, settings)
    except AdmissionConfigError as error:
        raise ConfigurationError(f"{error}\nfix the ConfigMap (docs/admission.md)") from error
    finally:
        await client.close()


def _decode(secret: dict[str, Any]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode()
            for key, value in (secret.get("data") or {}).items()}


def _encode(data: dict[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


class Runtime:
    def __init__(self, client: KubeClient, settings: AdmissionSettings):
        self.client = client
        self.settings = settings
        self.scratch = Path(tempfile.mkdtemp(prefix="berthmaster-admission-"))
        self.data: dict[str, str] = {}
        self.webhook: PlacementWebhook | None = None
        self.server: WebhookServer | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if not self.settings.service:
            await self.ensure_namespace()
        config = await read_config(self.client, self.settings)
        await self.reconcile_certificate()
        self.webhook = PlacementWebhook(self.client, config, BindingAccess(self.client))
        self.server = WebhookServer(
            self.webhook.answer, self.settings.host, self.settings.port,
            tls_context(self.data[certs.TLS_CERT], self.data[certs.TLS_KEY], self.scratch))
        await self.server.start()
        await self.publish()
        _log.info("placement admission webhook serving on %s (configurations %s)",
                  self.settings.url, self.settings.name)
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
        await self.reconcile_certificate()
        if self.data.get(certs.TLS_CERT) != before.get(certs.TLS_CERT):
            load_chain(self.server.context, self.data[certs.TLS_CERT],
                       self.data[certs.TLS_KEY], self.scratch)
            _log.info("placement admission webhook: serving certificate rotated")
        await self.publish()

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
        bundle = self.data[certs.CA_CERT]
        if self.settings.service:
            missing = await registration.inject_ca_bundle(self.client, self.settings.name,
                                                          bundle)
            if missing:
                _log.warning("placement admission: %s not found; install the chart with "
                             "admission.enabled=true", ", ".join(missing))
        else:  # the whole configurations, every time: an edit or deletion is undone
            target = registration.Target(url=self.settings.url)
            await registration.apply_configurations(
                self.client, registration.build_configurations(
                    self.settings.name, target, bundle, self.settings.namespace,
                    self.settings.failure_policy, self.settings.timeout_seconds))


@kopf.on.startup()
async def start_admission_webhook(**_: Any) -> None:
    if _State.settings is None:
        _log.info("placement admission webhook off (no --admission-listen)")
        return
    # The operator's shared client; its cleanup stops the server and the upkeep task before it
    # closes the client (requests keep arriving until the listener is gone).
    runtime = Runtime(await operator_client(), _State.settings)
    _State.runtime = runtime
    try:
        await runtime.start()
    except BaseException:
        await runtime.stop()
        raise
    stop_before_close(runtime.stop)
