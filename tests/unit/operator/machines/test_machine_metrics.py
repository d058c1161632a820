"""Machine API metrics (operator/machines/metrics.py), under machine-api-operator's names.

Upstream: openshift/machine-api-operator pkg/metrics/metrics.go ``MachineCollector``
(``collectMachineMetrics``: a Machine is reported only once it has a phase;
``collectMachineSetMetrics``) and ``MachinePhaseTransitionSeconds``. The drain gauge is ours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from berthmaster.operator.machines import api
from berthmaster.operator.machines.metrics import (
    MachineMetrics,
    machine_sample,
    phase_transition_seconds,
)
from tests.unit.operator.machines.machine_builders import make_machine

T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
DRAIN_AT = "2026-01-02T00:05:00Z"


def drainable(status: str) -> dict[str, Any]:
    return {"type": api.DRAINABLE, "status": status, "lastTransitionTime": DRAIN_AT}


def drained(status: str) -> dict[str, Any]:
    return {"type": api.DRAINED, "status": status, "lastTransitionTime": DRAIN_AT}


@pytest.mark.parametrize(("machine", "drain_started"), [
    (make_machine(phase=api.RUNNING), None),
    (make_machine(phase=api.DELETING, deleting=True, conditions=[drainable("False")]), None),
    (make_machine(phase=api.DELETING, deleting=True, conditions=[drainable("True")]),
     datetime(2026, 1, 2, 0, 5, tzinfo=UTC).timestamp()),
    (make_machine(phase=api.DELETING, deleting=True,
                  conditions=[drainable("True"), drained("False")]),
     datetime(2026, 1, 2, 0, 5, tzinfo=UTC).timestamp()),
    (make_machine(phase=api.DELETING, deleting=True,
                  conditions=[drainable("True"), drained("True")]), None),
    # Drainable True without a time: the deletion's
    (make_machine(phase=api.DELETING, deleting=True,
                  conditions=[{"type": api.DRAINABLE, "status": "True"}]),
     datetime(2026, 1, 2, tzinfo=UTC).timestamp()),
])
def test_drain_started(machine: dict[str, Any], drain_started: float | None) -> None:
    assert machine_sample(machine).drain_started == drain_started


def scrape(collector: MachineMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(collector)
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in families}


def test_families_follow_the_events() -> None:
    metrics = MachineMetrics()
    metrics.machine_seen(make_machine("a", phase=api.RUNNING, node="n1"))
    metrics.machine_seen(make_machine("b"))  # no phase yet: counted, not described
    metrics.machineset_seen({"apiVersion": api.API_VERSION, "metadata": {
        "name": "s", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 1}})
    seen = scrape(metrics)
    assert seen["mapi_machine_items"] == [({}, 2.0)]
    assert seen["mapi_machine_created_timestamp_seconds"] == [(
        {"name": "a", "namespace": "ns", "spec_provider_id": "", "node": "n1",
         "api_version": api.API_VERSION, "phase": api.RUNNING}, T0)]
    assert seen["mapi_machineset_items"] == [({}, 1.0)]
    assert seen["mapi_machine_set_status_replicas"] == [({"name": "s", "namespace": "ns"}, 3.0)]
    assert seen["mapi_machine_set_status_replicas_ready"][0][1] == 2.0
    assert seen["mapi_machine_set_status_replicas_available"][0][1] == 1.0
    assert seen["berthmaster_machine_drain_started_timestamp_seconds"] == []
    metrics.machine_seen(make_machine("a"), deleted=True)
    assert scrape(metrics)["mapi_machine_items"] == [({}, 1.0)]


def test_a_phase_seen_entering_is_observed_once() -> None:
    child = phase_transition_seconds.labels(api.PROVISIONED)
    before = child._sum.get()
    metrics = MachineMetrics()
    metrics.machine_seen(make_machine("p", phase=api.PROVISIONING), now=T0 + 5)
    metrics.machine_seen(make_machine("p", phase=api.PROVISIONED), now=T0 + 42)
    metrics.machine_seen(make_machine("p", phase=api.PROVISIONED), now=T0 + 50)
    assert child._sum.get() - before == 42.0


def test_upstream_series_keep_upstreams_exposed_names() -> None:
    """pkg/metrics/metrics.go and machinehealthcheck.go: Go's client exposes each series under
    the name it was given, so ``mapi_instance_create_failed`` has no ``_total`` and
    ``mapi_machinehealthcheck_remediation_success_total`` has exactly one."""
    from berthmaster.operator.machines.upstream_series import MACHINE, MHC, Series
    registry = CollectorRegistry()
    failed = Series("mapi_instance_create_failed", "h", MACHINE, "unknown")
    success = Series("mapi_machinehealthcheck_remediation_success_total", "h", MHC, "counter")
    short = Series("mapi_machinehealthcheck_short_circuit", "h", MHC)
    for series in (failed, success, short):
        registry.register(series)
    failed.inc("m", "ns", "boom")
    failed.inc("m", "ns", "boom")
    success.inc("c", "ns")
    short.set(1, "c", "ns")
    text = generate_latest(registry).decode()
    assert 'mapi_instance_create_failed{name="m",namespace="ns",reason="boom"} 2.0' in text
    assert 'mapi_machinehealthcheck_remediation_success_total{name="c",namespace="ns"} 1.0' \
        in text
    assert "# TYPE mapi_machinehealthcheck_remediation_success_total counter" in text
    assert 'mapi_machinehealthcheck_short_circuit{name="c",namespace="ns"} 1.0' in text
    short.remove("c", "ns")
    assert "mapi_machinehealthcheck_short_circuit{" not in generate_latest(registry).decode()
