"""Both components' /metrics, scraped through their Services as Prometheus would: through the
API server's Service proxy, and (on the real-kubelet cluster, whose host routes Service
addresses) at the Service's cluster IP through kube-proxy."""

from __future__ import annotations

import urllib.request

import pytest

from e2e.conftest import MODE, NAMESPACE, Kind, wait_for

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


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_metrics_through_the_service_proxy(kind: Kind, service: str) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/services/{service}:metrics/proxy/metrics"
    text = wait_for(lambda: kind.raw(path), f"{service} /metrics")
    assert SERVICES[service] in text
    assert "# TYPE " in text
    for family in FAMILIES[service]:
        assert family in text, family
    assert "scheduler_scheduler_cache_size" not in text  # the name 1.34 retired


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_metrics_at_the_cluster_ip(kind: Kind, service: str) -> None:
    if MODE != "kubelet":
        pytest.skip("only the real-kubelet cluster's host routes Service addresses")
    found = kind.get("service", service, "-n", NAMESPACE)
    address, port = found["spec"]["clusterIP"], found["spec"]["ports"][0]["port"]
    with urllib.request.urlopen(f"http://{address}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert SERVICES[service] in text
