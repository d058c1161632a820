"""machine-api-operator's failure and MachineHealthCheck metrics, from controllers run in this
process against the real API server (the series are read from this process's registry).

Upstream: pkg/metrics/metrics.go (``mapi_instance_create_failed{name,namespace,reason}``, the
reason being the error's text as the providers register it) and pkg/metrics/machinehealthcheck.go
(``mapi_machinehealthcheck_nodes_covered``, ``_remediation_success_total`` and
``_short_circuit``, each ``{name,namespace}``), observed where pkg/controller/machinehealthcheck
``Reconcile`` and ``internalRemediation`` observe them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.machines import api, upstream_series
from berthmaster.operator.machines.controller import MachineController
from berthmaster.operator.machines.healthcheck import mhc_path
from berthmaster.operator.machines.healthcheck_controller import HealthCheckController
from berthmaster.operator.machines.providers.kwok import KIND, KwokProvider
from tests.integration.operator.machines.conftest import get_machine, kwok_machine
from tests.integration.operator.machines.test_healthchecks import health_check, workers


async def test_failed_instance_create_is_counted_with_its_reason(
        kube: KubeClient, namespace: str, machine_api: Any, cleanup_nodes: list[str]) -> None:
    name = f"{namespace}-taken"
    cleanup_nodes.append(name)
    # A Node of that name that is not this Machine's instance: the kwok create fails.
    await kube.create(api.node_path(), {"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": name},
                                        "spec": {"providerID": "kwok://someone-else"}})
    await kube.create(api.machine_path(namespace), kwok_machine(name))
    controller = MachineController(kube, {KIND: KwokProvider(kube)})
    for _ in range(10):
        await controller.reconcile((namespace, name))
        machine = await get_machine(kube, namespace, name)
        if machine and (machine.get("status") or {}).get("phase") == api.FAILED:
            break
    assert machine is not None and machine["status"]["phase"] == api.FAILED
    reason = machine["status"]["errorMessage"]
    assert "already exists and is not this Machine's instance" in reason
    assert upstream_series.instance_create_failed.get(name, namespace, reason) == 1


async def test_health_check_series(kube: KubeClient, namespace: str, machine_api: Any) -> None:
    machineset = await kube.create(api.machineset_path(namespace), workers("idle", 0))
    owner = {"apiVersion": api.API_VERSION, "kind": "MachineSet", "name": "idle",
             "uid": machineset["metadata"]["uid"], "controller": True}
    for index in range(3):  # no Node a minute after the last update: unhealthy at once
        body = kwok_machine(f"stuck-{index}", labels={api.MACHINESET_LABEL: "idle"})
        body["metadata"]["ownerReferences"] = [owner]
        await kube.create(api.machine_path(namespace), body)
        await kube.patch(api.machine_path(namespace, f"stuck-{index}", "status"), {"status": {
            "phase": api.PROVISIONING,
            "lastUpdated": format_rfc3339(datetime.now(UTC) - timedelta(minutes=1))}})
    await kube.create(mhc_path(namespace), health_check("mhc", "idle", nodeStartupTimeout="30s",
                                                        maxUnhealthy=1))
    checks = HealthCheckController(kube)
    series = upstream_series
    await checks.reconcile((namespace, "mhc"))
    assert series.mhc_nodes_covered.get("mhc", namespace) == 3
    assert series.mhc_short_circuit.get("mhc", namespace) == 1
    assert series.mhc_remediation_success.get("mhc", namespace) is None

    await kube.patch(mhc_path(namespace, "mhc"), {"spec": {"maxUnhealthy": 3}})
    await checks.reconcile((namespace, "mhc"))
    assert series.mhc_short_circuit.get("mhc", namespace) == 0
    assert series.mhc_remediation_success.get("mhc", namespace) == 3

    await kube.delete(mhc_path(namespace, "mhc"))
    await checks.reconcile((namespace, "mhc"))
    assert series.mhc_nodes_covered.get("mhc", namespace) is None
    assert series.mhc_short_circuit.get("mhc", namespace) == 0
