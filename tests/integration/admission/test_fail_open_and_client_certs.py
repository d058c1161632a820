"""The webhook as the chart runs it (certificate files, reads only), on the real API server:

- failurePolicy when the webhook's own reads fail. Two processes under one ServiceAccount, one
  with ``--failure-policy Ignore`` and one with ``Fail``, each registered for namespaces of its
  own label. Once the account's RBAC is deleted, a pod under ``Ignore`` is admitted unchanged,
  kubectl printing the webhook's warning, and counted as ``fail_open``; under ``Fail`` it is
  refused with the reason. Before, both refused ("could not decide") whatever the policy.
- client certificates (``--client-ca-file``): the local control plane's kube-apiserver is
  started with an AdmissionConfiguration whose webhook kubeConfigFile presents a client
  certificate (berthmaster/tooling/devcluster/cluster.py ``webhook_client_config``), so pods are
  admitted through a webhook that requires one; a direct POST without one is answered 401, one
  with a certificate of another CA fails the handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import ssl
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.admission import certs, registration
from berthmaster.tooling.devcluster.certs import Pki
from berthmaster.tooling.devcluster.cluster import WEBHOOK_CLIENT, RunningCluster
from tests.integration.admission.conftest import (
    create_namespace,
    create_pod,
    delete_configurations,
    free_port,
    pod_body,
)
from tests.integration.chart.test_components_under_chart_rbac import running
from tests.support.accounts import account_kubeconfig, granted
from tests.support.waiting import wait_for

READS = [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
          "verbs": ["create"]},
         {"apiGroups": [""], "resources": ["namespaces", "nodes", "configmaps"],
          "verbs": ["get"]}]
SELECTOR = "scheduler.alpha.kubernetes.io/node-selector"
LABEL = "berthmaster.test/policy"


def serving_files(folder: Path) -> tuple[str, Path, Path]:
    """A CA and a serving certificate for 127.0.0.1, as the chart's Secret holds them."""
    now = datetime.datetime.now(datetime.UTC)
    ca, ca_key = certs.new_ca(now, datetime.timedelta(days=1))
    cert, key = certs.issue_serving(ca, ca_key, ["127.0.0.1", "localhost"], now,
                                    datetime.timedelta(days=1))
    (folder / "tls.crt").write_text(cert)
    (folder / "tls.key").write_text(key)
    return ca, folder / "tls.crt", folder / "tls.key"


async def register(kube: KubeClient, name: str, port: int, ca: str, own: str, policy: str,
                   label: str | None = None) -> None:
    configurations = registration.build_configurations(
        name, registration.Target(url=f"https://127.0.0.1:{port}"), ca, own, policy, 5)
    if label is not None:
        for configuration in configurations:
            configuration["webhooks"][0]["namespaceSelector"] = {"matchLabels": {LABEL: label}}
    await registration.apply_configurations(kube, configurations)


@contextlib.asynccontextmanager
async def webhook(args: Sequence[str], log: Path) -> AsyncIterator[None]:
    async with running(["admission", *args], log) as process:
        yield
        assert process.returncode is None, log.read_text()[-3000:]


async def labelled_namespace(kube: KubeClient, label: str) -> str:
    name = f"adm-{uuid.uuid4().hex[:6]}"
    await kube.create(resource_path(CORE, "namespaces"), {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {LABEL: label},
                     "annotations": {SELECTOR: "env=test"}}})
    return name


async def mutated(kube: KubeClient, namespace: str) -> bool:
    try:
        pod = await create_pod(kube, namespace, pod_body("probe"))
    except KubeError:
        return False
    return (pod["spec"].get("nodeSelector") or {}) == {"env": "test"}


async def counter(port: int, outcome: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    return sum(float(line.split()[1]) for line in text.splitlines()
               if line.startswith("berthmaster_admission_requests_total{")
               and f'outcome="{outcome}"' in line)


def kubectl_dry_run(cluster: RunningCluster, namespace: str, name: str
                    ) -> tuple[int, str, dict[str, Any]]:
    """``kubectl create --dry-run=server`` of a pod: exit status, stderr, the pod."""
    done = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", namespace,
                           "-f", "-", input=json.dumps(pod_body(name)))
    return done.returncode, done.stderr, json.loads(done.stdout) if done.returncode == 0 else {}


@pytest.mark.timeout(300)
async def test_ignore_fails_open_and_fail_closes_when_reads_fail(
        kube: KubeClient, cluster: RunningCluster, tmp_path: Path) -> None:
    own = await create_namespace(kube, prefix="berthmaster")
    name = f"placement-{uuid.uuid4().hex[:6]}"
    ca, cert, key = serving_files(tmp_path)
    kubeconfig = await account_kubeconfig(kube, cluster, own, tmp_path, name="admission")
    ports = {"Ignore": free_port(), "Fail": free_port()}
    metrics = free_port()
    spaces: dict[str, str] = {}
    try:
        async with contextlib.AsyncExitStack() as processes:
            async with granted(kube, own, "admission", READS):
                for policy, port in ports.items():
                    args = ["--kubeconfig", str(kubeconfig), "--listen", f"127.0.0.1:{port}",
                            "--namespace", own, "--name", f"{name}-{policy.lower()}",
                            "--webhook-cert-file", str(cert), "--webhook-key-file", str(key),
                            "--failure-policy", policy]
                    if policy == "Ignore":
                        args += ["--metrics-bind-address", f"127.0.0.1:{metrics}"]
                    await processes.enter_async_context(
                        webhook(args, tmp_path / f"{policy}.log"))
                    await register(kube, f"{name}-{policy.lower()}", port, ca, own, policy,
                                   policy)
                    spaces[policy] = await labelled_namespace(kube, policy)
                    await wait_for(lambda ns=spaces[policy]: mutated(kube, ns), timeout=60,
                                   what=f"the {policy} webhook serving")
            # The account's rules are deleted; both webhooks keep running.

            async def admitted_with_warning() -> tuple[str, dict[str, Any]] | None:
                status, stderr, pod = await asyncio.to_thread(
                    kubectl_dry_run, cluster, spaces["Ignore"], "unchecked")
                assert status == 0, stderr
                return (stderr, pod) if "could not check this request" in stderr else None

            stderr, pod = await wait_for(admitted_with_warning, timeout=60,
                                         what="a pod admitted unchecked under Ignore")
            assert ("Warning: berthmaster placement admission could not check this request "
                    "(403 Forbidden: ") in stderr
            assert "admitted unchanged because its failurePolicy is Ignore" in stderr
            assert not pod["spec"].get("nodeSelector")
            assert await counter(metrics, "fail_open") >= 1

            with pytest.raises(KubeError) as caught:
                await create_pod(kube, spaces["Fail"], pod_body("refused"))
            assert caught.value.status == 500
            assert ('denied the request: berthmaster placement admission could not decide: '
                    '403 Forbidden: ') in caught.value.message
            assert "cannot get resource" in caught.value.message
    finally:
        for policy in ports:
            await delete_configurations(kube, f"{name}-{policy.lower()}")
        for namespace in (own, *spaces.values()):
            with contextlib.suppress(KubeError):
                await kube.delete(resource_path(CORE, "namespaces", name=namespace))


async def direct_review(port: int, ca: str, client: tuple[Path, Path] | None) -> int:
    """A direct POST of an AdmissionReview; the HTTP status."""
    context = ssl.create_default_context(cadata=ca)
    if client is not None:
        context.load_cert_chain(*client)
    body = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "request": {"uid": "direct", "operation": "CONNECT"}})
    async with aiohttp.ClientSession() as session, session.post(
            f"https://127.0.0.1:{port}/validate", data=body, ssl=context) as response:
        await response.read()
        return response.status


async def test_client_certificates_from_the_api_server(
        kube: KubeClient, cluster: RunningCluster, tmp_path: Path) -> None:
    own = await create_namespace(kube, prefix="berthmaster")
    name = f"placement-{uuid.uuid4().hex[:6]}"
    ca, cert, key = serving_files(tmp_path)
    pki = Pki(cluster.root / "pki")
    port = free_port()
    namespace = ""
    try:
        async with webhook(["--kubeconfig", str(cluster.kubeconfig), "--listen",
                            f"127.0.0.1:{port}", "--namespace", own, "--name", name,
                            "--webhook-cert-file", str(cert), "--webhook-key-file", str(key),
                            "--client-ca-file", str(pki.ca_cert)], tmp_path / "admission.log"):
            await register(kube, name, port, ca, own, "Fail", "client-certs")
            namespace = await labelled_namespace(kube, "client-certs")
            # The API server's calls carry its webhook client certificate: pods are mutated.
            await wait_for(lambda: mutated(kube, namespace), timeout=60,
                           what="the API server admitted through the webhook")
            assert await direct_review(port, ca, None) == 401
            assert await direct_review(
                port, ca, (pki.client_cert(WEBHOOK_CLIENT), pki.client_key(WEBHOOK_CLIENT))
            ) == 200
            stranger = certs.issue_serving(*certs.new_ca(datetime.datetime.now(datetime.UTC),
                                                         datetime.timedelta(days=1)),
                                           ["stranger"], datetime.datetime.now(datetime.UTC),
                                           datetime.timedelta(days=1))
            (tmp_path / "stranger.crt").write_text(stranger[0])
            (tmp_path / "stranger.key").write_text(stranger[1])
            with pytest.raises(aiohttp.ClientError):
                await direct_review(port, ca, (tmp_path / "stranger.crt",
                                               tmp_path / "stranger.key"))
    finally:
        await delete_configurations(kube, name)
        for space in (own, namespace):
            if space:
                with contextlib.suppress(KubeError):
                    await kube.delete(resource_path(CORE, "namespaces", name=space))


async def serves_ca(port: int, ca: str) -> bool:
    """Whether a handshake verified by ``ca`` alone succeeds."""
    context = ssl.create_default_context(cadata=ca)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                  server_hostname="127.0.0.1")
    except (OSError, ssl.SSLError):
        return False
    writer.close()
    return True


async def test_certificate_files_are_reloaded_when_they_change(
        kube: KubeClient, cluster: RunningCluster, tmp_path: Path) -> None:
    """kubelet replaces a mounted Secret's files when the Secret changes (cert-manager's
    renewal, or a new Secret and ``helm upgrade``); new handshakes get the new certificate
    without a restart."""
    own = await create_namespace(kube, prefix="berthmaster")
    first = tmp_path / "first"
    first.mkdir()
    ca, cert, key = serving_files(first)
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    for path in (cert, key):
        (mounted / path.name).write_text(path.read_text())
    port = free_port()
    args = ["--kubeconfig", str(cluster.kubeconfig), "--listen", f"127.0.0.1:{port}",
            "--namespace", own, "--webhook-cert-file", str(mounted / "tls.crt"),
            "--webhook-key-file", str(mounted / "tls.key")]
    log = tmp_path / "admission.log"
    try:
        async with running(["admission", *args], log,
                           {"BERTHMASTER_ADMISSION_CHECK_SECONDS": "1"}) as process:
            await wait_for(lambda: serves_ca(port, ca), timeout=60, what="the first certificate")
            second = tmp_path / "second"
            second.mkdir()
            renewed_ca, renewed_cert, renewed_key = serving_files(second)
            for path in (renewed_key, renewed_cert):  # replaced whole, as kubelet swaps them
                (mounted / f"{path.name}.new").write_text(path.read_text())
                (mounted / f"{path.name}.new").rename(mounted / path.name)
            await wait_for(lambda: serves_ca(port, renewed_ca), timeout=60,
                           what="the renewed certificate")
            assert not await serves_ca(port, ca)
            assert process.returncode is None
        assert "serving certificate rotated" in log.read_text()
    finally:
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(CORE, "namespaces", name=own))
