"""The chart's way: ``helm install --set admission.enabled=true`` on the real API server, then
``berthmaster admission`` run with exactly the chart's arguments, the chart's Secret as its
mounted files and a token of the chart's ServiceAccount (every request authorized by the chart's
RBAC only): it passes its preflight, serves the Secret's certificate under the Service's name,
trusted by the caBundle helm wrote into both configurations, serves its metrics port with the
API server's authentication and authorization, and is refused nothing. A
``helm upgrade`` keeps the Secret and the caBundle (lookup), so replicas and the API server keep
agreeing across upgrades.

The local control plane has no kube-proxy, so the API server cannot reach a Service here: the
release uses ``failurePolicy: Ignore`` and is uninstalled at the end of the module, and the
serving is checked by connecting to the process directly with the Service's DNS name.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.admission.conftest import REGISTRATION, free_port
from tests.integration.chart.chartkit import CHART, SHARED_CRDS, helm, one, render
from tests.integration.chart.test_components_under_chart_rbac import (
    refusals,
    running,
    service_account_kubeconfig,
)
from tests.support.waiting import wait_for

VALUES = ["admission.enabled=true", "admission.failurePolicy=Ignore",
          "admission.timeoutSeconds=1", "operator.capabilities={deschedulers}"]


@pytest.fixture(scope="module")
async def release(cluster: RunningCluster) -> AsyncIterator[dict[str, str]]:
    name = f"adm{uuid.uuid4().hex[:5]}"
    namespace = f"{name}-system"
    args = ["install", name, str(CHART), "--namespace", namespace, "--create-namespace",
            "--kubeconfig", str(cluster.kubeconfig), *SHARED_CRDS]
    for value in VALUES:
        args += ["--set", value]
    result = await asyncio.to_thread(helm, *args)
    assert result.returncode == 0, result.stderr
    try:
        yield {"release": name, "namespace": namespace, "prefix": f"{name}-berthmaster"}
    finally:
        await asyncio.to_thread(helm, "uninstall", name, "--namespace", namespace,
                                "--kubeconfig", str(cluster.kubeconfig), "--wait=false")
        await asyncio.to_thread(cluster.kubectl, "delete", "namespace", namespace,
                                "--wait=false")


async def handshake(port: int, server_name: str, ca: str) -> bool:
    context = ssl.create_default_context(cadata=ca)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                  server_hostname=server_name)
    except (OSError, ssl.SSLError):
        return False
    writer.close()
    return True


async def metrics_status(port: int, path: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(
            f"https://127.0.0.1:{port}{path}", headers=headers, ssl=False) as response:
        return response.status


async def ca_bundles(kube: KubeClient, name: str) -> set[str]:
    return {(await kube.get(resource_path(REGISTRATION, plural, name=name)))["webhooks"][0][
        "clientConfig"]["caBundle"]
        for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")}


async def test_the_webhook_serves_the_charts_certificate_with_the_charts_rbac(
        kube: KubeClient, cluster: RunningCluster, release: dict[str, str],
        tmp_path: Path) -> None:
    objects = render(VALUES, release=release["release"], namespace=release["namespace"])
    container = one(objects, "Deployment", "-admission")["spec"]["template"]["spec"][
        "containers"][0]
    secret = await kube.get(resource_path(CORE, "secrets", release["namespace"],
                                          f"{release['prefix']}-admission-tls"))
    files = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    mounted = tmp_path / "admission-tls"
    mounted.mkdir()
    for key in ("tls.crt", "tls.key"):
        (mounted / key).write_text(files[key])
    port, metrics = free_port(), free_port()
    args = []
    for arg in container["args"]:
        flag = arg.split("=", 1)[0]
        arg = {"--listen": f"--listen=127.0.0.1:{port}",
               "--secure-port": f"--secure-port={metrics}",
               "--bind-address": "--bind-address=127.0.0.1",
               "--webhook-cert-file": f"--webhook-cert-file={mounted / 'tls.crt'}",
               "--webhook-key-file": f"--webhook-key-file={mounted / 'tls.key'}"}.get(flag, arg)
        args.append(arg)
    kubeconfig = await service_account_kubeconfig(
        kube, cluster, release["namespace"], f"{release['prefix']}-admission", tmp_path)
    env = {"POD_NAMESPACE": release["namespace"]}
    name = f"{release['prefix']}-placement"
    bundle = base64.b64decode(secret["data"]["ca.crt"]).decode()
    assert await ca_bundles(kube, name) == {secret["data"]["ca.crt"]}
    service = f"{release['prefix']}-admission.{release['namespace']}.svc"
    log = tmp_path / "admission.log"
    async with running([*args, "--kubeconfig", str(kubeconfig)], log, env) as process:

        async def serving() -> bool:
            assert process.returncode is None, log.read_text()[-3000:]
            return await handshake(port, service, bundle)

        await wait_for(serving, timeout=90, what="the webhook serving the chart's certificate")
        # The metrics port as metrics.serving=authenticated: probes open, /metrics reviewed by
        # the API server (TokenReview and SubjectAccessReview with the chart's auth-delegator
        # binding); neither an anonymous caller nor the webhook's own account reads metrics.
        token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
        assert await metrics_status(metrics, "/healthz", None) == 200
        assert await metrics_status(metrics, "/metrics", None) == 403
        assert await metrics_status(metrics, "/metrics", token) == 403
    assert refusals(log) == [], "\n".join(refusals(log))

    upgrade = ["upgrade", release["release"], str(CHART), "--namespace", release["namespace"],
               "--kubeconfig", str(cluster.kubeconfig), *SHARED_CRDS]
    for value in VALUES:
        upgrade += ["--set", value]
    result = await asyncio.to_thread(helm, *upgrade)
    assert result.returncode == 0, result.stderr
    after = await kube.get(resource_path(CORE, "secrets", release["namespace"],
                                         f"{release['prefix']}-admission-tls"))
    assert after["data"] == secret["data"]
    assert await ca_bundles(kube, name) == {secret["data"]["ca.crt"]}
