"""The chart's way: ``helm install --set admission.enabled=true``, then the operator, run with
exactly the chart's arguments and a token of the chart's ServiceAccount (so every request is
authorized by the chart's RBAC only), makes its certificate Secret, writes its CA into the
two configurations the chart installed, and serves TLS under the Service's name.

The local control plane has no kube-proxy, so the API server cannot reach a Service here: the
release uses ``failurePolicy: Ignore`` and is uninstalled at the end of the module, and the
serving is checked by connecting to the operator directly with the Service's DNS name.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.devcluster.cluster import RunningCluster
from berthmaster.kube import CORE, KubeClient, KubeError, resource_path
from tests.integration.admission.conftest import REGISTRATION, free_port
from tests.integration.chart.chartkit import CHART, helm, one, render
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
            "--kubeconfig", str(cluster.kubeconfig)]
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


async def test_operator_injects_its_ca_into_the_charts_configurations(
        kube: KubeClient, cluster: RunningCluster, release: dict[str, str],
        tmp_path: Path) -> None:
    objects = render(VALUES, release=release["release"], namespace=release["namespace"])
    container: dict[str, Any] = dict(one(objects, "Deployment", "-operator")["spec"]["template"][
        "spec"]["containers"][0])
    port = free_port()
    args = ["--liveness=" if arg.startswith("--liveness=")
            else f"--admission-listen=127.0.0.1:{port}" if arg.startswith("--admission-listen=")
            else arg for arg in container["args"]]
    kubeconfig = await service_account_kubeconfig(
        kube, cluster, release["namespace"], f"{release['prefix']}-operator", tmp_path)
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    env.update(POD_NAMESPACE=release["namespace"], KUBECONFIG=str(kubeconfig))
    name = f"{release['prefix']}-placement"
    secret_path = resource_path(CORE, "secrets", release["namespace"],
                                f"{release['prefix']}-admission-tls")
    log = tmp_path / "operator.log"
    async with running(args, log, env) as process:

        async def injected() -> str | None:
            assert process.returncode is None, log.read_text()[-3000:]
            try:
                bundle = (await kube.get(secret_path))["data"]["ca.crt"]
            except KubeError:
                return None
            for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
                configuration = await kube.get(resource_path(REGISTRATION, plural, name=name))
                if configuration["webhooks"][0]["clientConfig"].get("caBundle") != bundle:
                    return None
            return bundle

        bundle = await wait_for(injected, timeout=90, what="the CA in both configurations")
        service = f"{release['prefix']}-admission.{release['namespace']}.svc"
        assert await handshake(port, service, base64.b64decode(bundle).decode())
    assert refusals(log) == [], "\n".join(refusals(log))
