"""Fixtures for the placement admission tests: ``berthmaster admission`` serving on loopback.

``admission`` runs ``berthmaster admission --listen 127.0.0.1:<port>`` (self-managed: its
certificate in a Secret, the configurations written by itself) as a subprocess for the whole
module, with its own namespace (for the Secret and ConfigMap) and its own configuration names;
the local control plane's kube-apiserver calls it over TLS. The fixture waits until the API
server actually applies the webhook (a dry-run pod gets the namespace's selector), and at the end
stops the process and deletes both configurations, so no other test module ever meets them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.devcluster.cluster import RunningCluster
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
REGISTRATION = group_path("admissionregistration.k8s.io", "v1")
JSON = dict[str, Any]


def admission_command(kubeconfig: Path | str, port: int, namespace: str, name: str,
                      *extra: str) -> list[str]:
    return [*BERTHMASTER_CLI, "admission", "--kubeconfig",
            str(kubeconfig), "--listen", f"127.0.0.1:{port}", "--namespace", namespace,
            "--name", name, *extra]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class AdmissionProcess:
    """One ``berthmaster admission`` process; restartable (``stop``/``start``)."""

    cluster: RunningCluster
    namespace: str
    name: str
    port: int
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), **self.env}
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            admission_command(self.cluster.kubeconfig, self.port, self.namespace, self.name,
                              *self.extra_args),
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


async def create_namespace(kube: KubeClient, annotations: dict[str, str] | None = None,
                           prefix: str = "adm") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.create(resource_path(CORE, "namespaces"), {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "annotations": annotations or {}}})
    return name


def pod_body(name: str, **spec: Any) -> JSON:
    """A minimal pod (no service account token: tests need not wait for the default
    ServiceAccount)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "app", "image": "registry.example/app:1"}],
                     **spec}}


async def create_pod(kube: KubeClient, namespace: str, body: JSON, dry_run: bool = True,
                     headers: dict[str, str] | None = None) -> JSON:
    params = {"dryRun": "All"} if dry_run else None
    return await kube.request("POST", resource_path(CORE, "pods", namespace), body=body,
                              params=params, headers=headers)


async def refusal(kube: KubeClient, namespace: str, body: JSON, path: str | None = None,
                  headers: dict[str, str] | None = None) -> KubeError:
    """The error the API server answers a (dry-run) create with; fails if it succeeds."""
    with pytest.raises(KubeError) as caught:
        await kube.request("POST", path or resource_path(CORE, "pods", namespace), body=body,
                           params={"dryRun": "All"}, headers=headers)
    return caught.value


async def write_config(kube: KubeClient, webhook: AdmissionProcess, text: str) -> None:
    path = resource_path(CORE, "configmaps", webhook.namespace, webhook.name)
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": webhook.name, "namespace": webhook.namespace},
            "data": {"config.yaml": text}}
    try:
        await kube.replace(path, body)
    except KubeError as error:
        if not error.not_found:
            raise
        await kube.create(resource_path(CORE, "configmaps", webhook.namespace), body)


async def delete_configurations(kube: KubeClient, name: str) -> None:
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(REGISTRATION, plural, name=name))


async def wait_webhook_active(kube: KubeClient) -> None:
    """Until the API server calls the webhook: a dry-run pod in a namespace with a node
    selector annotation comes back with it merged."""
    probe = await create_namespace(
        kube, {"scheduler.alpha.kubernetes.io/node-selector": "berthmaster-probe=yes"},
        prefix="probe")
    try:
        async def merged() -> bool:
            try:
                pod = await create_pod(kube, probe, pod_body("probe"))
            except KubeError:  # failurePolicy Fail while the webhook starts
                return False
            return (pod["spec"].get("nodeSelector") or {}).get("berthmaster-probe") == "yes"

        await wait_for(merged, timeout=60, what="the API server calling the webhook")
    finally:
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(CORE, "namespaces", name=probe))


@pytest.fixture(scope="module")
def admission_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("admission") / "admission.log"


@pytest.fixture(scope="module")
async def admission(cluster: RunningCluster, kube: KubeClient, admission_log: Path,
                    request: pytest.FixtureRequest) -> AsyncIterator[AdmissionProcess]:
    """The webhook process, with the module's ``ADMISSION_CONFIG`` (if any) in its ConfigMap,
    ``ADMISSION_ENV`` in its environment and ``ADMISSION_ARGS`` on its command line."""
    own = await create_namespace(kube, prefix="berthmaster")
    webhook = AdmissionProcess(cluster, own, f"placement-{uuid.uuid4().hex[:6]}",
                                 free_port(), admission_log,
                                 env=dict(getattr(request.module, "ADMISSION_ENV", {})),
                                 extra_args=tuple(getattr(request.module, "ADMISSION_ARGS", ())))
    config = getattr(request.module, "ADMISSION_CONFIG", "")
    if config:
        await write_config(kube, webhook, config)
    webhook.start()
    try:
        await wait_webhook_active(kube)
        yield webhook
    finally:
        webhook.stop()
        await delete_configurations(kube, webhook.name)
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(CORE, "namespaces", name=own))
        print(webhook.log()[-8000:])


@pytest.fixture
async def project(kube: KubeClient) -> AsyncIterator[Any]:
    """Makes namespaces with annotations for one test and deletes them after it."""
    made: list[str] = []

    async def make(annotations: dict[str, str] | None = None) -> str:
        name = await create_namespace(kube, annotations)
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(CORE, "namespaces", name=name))


def impersonate(user: str) -> dict[str, str]:
    """Headers that make the admin client act as ``user`` (kube-apiserver's impersonation;
    the API server adds system:authenticated)."""
    return {"Impersonate-User": user}
