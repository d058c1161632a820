"""Node utilization from a Prometheus query, for LowNodeUtilization's ``metricsUtilization``
with ``source: Prometheus``.

Upstream (sigs.k8s.io/descheduler): the policy's ``metricsProviders`` entry ``{source:
Prometheus, prometheus: {url, authToken: {secretReference: {namespace, name}}}}`` names the
server (pkg/api/types.go); the plugin's ``metricsUtilization.prometheus.query`` is run once per
pass as an instant query (pkg/framework/plugins/nodeutilization/usageclients.go,
NodeUsageFromPrometheusMetrics): the result must be a vector whose samples carry the node's
name in the ``instance`` label and a value in [0, 1]; each becomes the node's usage of the
pseudo-resource ``MetricResource`` as a percentage (value × 100, truncated), against a
capacity of 100 (nodeutilization.go referencedResourceListForNodeCapacity). A pod's share of
that usage is unknown (prometheusUsageClient.podUsage: not supported), so evictions from a
node are unconstrained: one pod per over-utilized node, or up to ``evictionLimits.node``.

Authentication (pkg/descheduler/prom_client_controller.go): with ``authToken`` the bearer
token is the Secret's ``prometheusAuthToken`` key; without it, the pod's own ServiceAccount
token when running in a cluster; TLS is verified against the ServiceAccount's CA bundle when
there is one (pkg/descheduler/client/client.go CreatePrometheusClient), else the system's.

Design: :func:`node_usage_from_result` is the pure conversion (upstream's sentences for a
bad result); :func:`read_prometheus_usage` is the only I/O: the Secret, then one HTTP GET of
Prometheus' ``/api/v1/query`` (web/api/v1/api.go), run in a thread (urllib: one request a
pass), ending in :class:`PrometheusUnavailable` with what to fix.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.scheduler.descheduler.usage_metrics import ActualUsage

METRIC_RESOURCE = "MetricResource"
TOKEN_KEY = "prometheusAuthToken"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
REASON_UNAVAILABLE = "PrometheusUnavailable"
TIMEOUT_SECONDS = 30.0


class PrometheusUnavailable(Exception):
    """The query could not be run or its result cannot be used; nothing is evicted."""


@dataclass(frozen=True)
class PrometheusProvider:
    """The policy's ``metricsProviders`` Prometheus entry."""

    url: str
    secret_namespace: str | None = None
    secret_name: str | None = None


def node_usage_from_result(body: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """An instant query's answer (``{"status", "data": {"resultType", "result"}}``) as
    ``{node: {MetricResource: percent}}``; raises PrometheusUnavailable as upstream's
    NodeUsageFromPrometheusMetrics fails."""
    if body.get("status") != "success":
        raise PrometheusUnavailable(f"unable to capture prometheus metrics: {body.get('errorType')}"
                                    f": {body.get('error')}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusUnavailable(f'expected query results to be of type "vector", got '
                                    f'"{data.get("resultType")}" instead')
    usage: dict[str, dict[str, int]] = {}
    for sample in data.get("result") or ():
        node = (sample.get("metric") or {}).get("instance")
        if node is None:
            raise PrometheusUnavailable("the collected metrics sample is missing 'instance' key")
        value = float((sample.get("value") or (0, "0"))[1])
        if not 0 <= value <= 1:
            raise PrometheusUnavailable(f'the collected metrics sample for "{node}" has value '
                                        f"{value:g} outside of <0; 1> interval")
        usage[str(node)] = {METRIC_RESOURCE: int(value * 100)}
    return usage


def query_url(base: str, query: str) -> str:
    return f"{base.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"


def tls_context(service_account: Path = SERVICE_ACCOUNT) -> ssl.SSLContext:
    ca = service_account / "ca.crt"
    return ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)


async def bearer_token(kube: KubeClient, provider: PrometheusProvider,
                       service_account: Path = SERVICE_ACCOUNT) -> str | None:
    """The Secret's token, or the pod's ServiceAccount token, or none (module docstring)."""
    if provider.secret_name is None or provider.secret_namespace is None:
        token_file = service_account / "token"
        return token_file.read_text().strip() if token_file.is_file() else None
    where = f"{provider.secret_namespace}/{provider.secret_name}"
    try:
        secret = await kube.get_if_exists(resource_path(CORE, "secrets",
                                                        provider.secret_namespace,
                                                        provider.secret_name))
    except KubeError as error:
        raise PrometheusUnavailable(f"unable to get {where} secret: {error}") from error
    if secret is None:
        raise PrometheusUnavailable(f"unable to get {where} secret: not found")
    encoded = (secret.get("data") or {}).get(TOKEN_KEY) or ""
    token = base64.b64decode(encoded).decode().strip() if encoded else ""
    if not token:
        raise PrometheusUnavailable(f'prometheus authentication token secret missing '
                                    f'"{TOKEN_KEY}" data or empty')
    return token


def _get(url: str, token: str | None) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = tls_context() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS, context=context) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        detail = error.read(2000).decode(errors="replace")
        try:  # Prometheus' own error body: {"status": "error", "errorType", "error"}
            return json.loads(detail)
        except ValueError:
            raise PrometheusUnavailable(f"unable to capture prometheus metrics: HTTP "
                                        f"{error.code} from {url}: {detail[:300]}") from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise PrometheusUnavailable(f"unable to capture prometheus metrics: {error}") from error


async def read_prometheus_usage(kube: KubeClient, provider: PrometheusProvider,
                                query: str) -> ActualUsage:
    """Run ``query`` once; node usage as :class:`ActualUsage` with no per-pod usage."""
    token = await bearer_token(kube, provider)
    body = await asyncio.to_thread(_get, query_url(provider.url, query), token)
    return ActualUsage(nodes=node_usage_from_result(body), per_pod=False)
