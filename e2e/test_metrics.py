"""Both components' /metrics, scraped through their Services as Prometheus would: over HTTPS
with the token of a ServiceAccount bound to the chart's metrics-reader ClusterRole (the chart's
default metrics.serving=authenticated, docs/observability.md) — through ``kubectl
port-forward`` to the Service and (on the real-kubelet cluster, whose host routes Service
addresses) at the Service's cluster IP through kube-proxy. The API server's Service proxy
forwards no credentials: through it the probes answer and /metrics refuses the anonymous user,
as kube-scheduler's secure port does."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from e2e.conftest import KUBECONFIG, MODE, NAMESPACE, Kind, kubectl_binary, wait_for

SERVICES = {
    # A counter every replica exposes, leader or not (the Service picks either).
    "berthmaster-scheduler-metrics": "# TYPE scheduler_schedule_attempts_total counter",
    "berthmaster-operator-metrics": "cluster_autoscaler_",
}
# Families either replica exports (docs/observability.md): kube-scheduler 1.35's cache gauge,
# client-go's leader-election gauge, the process collector; the operator's Machine API,
# descheduler and autoscaler-health families.
FAMILIES = {
    "berthmaster-scheduler-metrics": ("# TYPE scheduler_cache_size gauge",
                                      "# TYPE leader_election_master_status gauge",
                                      "# TYPE process_cpu_seconds_total counter"),
    "berthmaster-operator-metrics": ("# TYPE mapi_machine_items gauge",
                                     "# TYPE descheduler_pods_evicted_total counter",
                                     "# TYPE cluster_autoscaler_cluster_safe_to_autoscale gauge",
                                     "# TYPE process_cpu_seconds_total counter"),
}
READER = "e2e-metrics-reader"
# the pods' certificates are self-signed (the ServiceMonitor's default insecureSkipVerify)
UNVERIFIED = ssl._create_unverified_context()


@pytest.fixture(scope="module")
def reader_token(kind: Kind) -> Iterator[str]:
    """A token of a ServiceAccount bound to the chart's <release>-metrics-reader."""
    kind.run("create", "serviceaccount", READER, "-n", NAMESPACE)
    kind.run("create", "clusterrolebinding", READER, "--clusterrole=berthmaster-metrics-reader",
             f"--serviceaccount={NAMESPACE}:{READER}")
    try:
        yield kind.run("create", "token", READER, "-n", NAMESPACE).stdout.strip()
    finally:
        kind.run("delete", "clusterrolebinding", READER, check=False)
        kind.run("delete", "serviceaccount", READER, "-n", NAMESPACE, check=False)


def scrape(url: str, token: str) -> str | None:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10, context=UNVERIFIED) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return None  # RBAC still propagating, or the port-forward not yet up


@contextlib.contextmanager
def port_forward(service: str, port: int) -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local = int(probe.getsockname()[1])
    process = subprocess.Popen(
        [kubectl_binary(), "--kubeconfig", KUBECONFIG, "-n", NAMESPACE, "port-forward",
         f"svc/{service}", f"{local}:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield local
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_metrics_through_a_port_forward_with_a_readers_token(kind: Kind, reader_token: str,
                                                            service: str) -> None:
    port = kind.get("service", service, "-n", NAMESPACE)["spec"]["ports"][0]["port"]
    with port_forward(service, port) as local:
        text = wait_for(lambda: scrape(f"https://127.0.0.1:{local}/metrics", reader_token),
                        f"{service} /metrics")
    assert SERVICES[service] in text
    assert "# TYPE " in text
    for family in FAMILIES[service]:
        assert family in text, family
    assert "scheduler_scheduler_cache_size" not in text  # the name 1.34 retired


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_the_service_proxy_reaches_the_probes_but_not_the_metrics(kind: Kind,
                                                                  service: str) -> None:
    base = f"/api/v1/namespaces/{NAMESPACE}/services/https:{service}:metrics/proxy"
    assert wait_for(lambda: kind.raw(f"{base}/healthz"), f"{service} /healthz") == "ok"
    refused = kind.run("get", "--raw", f"{base}/metrics", check=False)
    assert refused.returncode != 0
    assert "system:anonymous" in refused.stderr and "/metrics" in refused.stderr, (
        refused.stderr)


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_metrics_at_the_cluster_ip(kind: Kind, reader_token: str, service: str) -> None:
    if MODE != "kubelet":
        pytest.skip("only the real-kubelet cluster's host routes Service addresses")
    found = kind.get("service", service, "-n", NAMESPACE)
    address, port = found["spec"]["clusterIP"], found["spec"]["ports"][0]["port"]
    text = wait_for(lambda: scrape(f"https://{address}:{port}/metrics", reader_token),
                    f"{service} /metrics at {address}:{port}")
    assert SERVICES[service] in text
