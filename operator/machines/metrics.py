"""Machine API metrics under openshift/machine-api-operator's names, and the drains in flight.

Design: upstream's collector (machine-api-operator pkg/metrics ``MachineCollector``) lists its
informers' Machines and MachineSets at every scrape; ours keeps the latest copy of each, fed by
the kopf event handlers that already see every change (:meth:`MachineMetrics.machine_seen`,
``machineset_seen``), and renders the families at scrape time from that copy:

- ``mapi_machine_items``, ``mapi_machineset_items``;
- ``mapi_machine_created_timestamp_seconds{name,namespace,spec_provider_id,node,api_version,
  phase}`` for every Machine with a phase;
- ``mapi_machineset_created_timestamp_seconds{name,namespace,api_version}`` and
  ``mapi_machine_set_status_replicas{,_available,_ready}{name,namespace}``;
- ``mapi_machine_phase_transition_seconds{phase}``: seconds from a Machine's creation to each
  phase it is seen entering (upstream's buckets);
- ``berthmaster_machine_drain_started_timestamp_seconds{name,namespace,node}`` (ours: upstream
  has no drain metric): while a deleted Machine's hooks let it drain (``Drainable`` True) but
  its ``Drained`` condition is not yet True, when that drain began (``Drainable``'s transition
  time); ``time() - it`` is how long the drain has been running.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import REGISTRY, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from berthmaster.operator.machines import api

Key = tuple[str, str]

phase_transition_seconds = Histogram(
    "mapi_machine_phase_transition_seconds",
    "Number of seconds between Machine creation and Machine transition to a phase.", ["phase"],
    buckets=(5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 360, 480, 600))


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _condition(machine: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (machine.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition  # type: ignore[no-any-return]
    return None


@dataclass(frozen=True)
class MachineSample:
    name: str
    namespace: str
    provider_id: str
    node: str
    api_version: str
    phase: str
    created: float
    drain_started: float | None


def machine_sample(machine: Mapping[str, Any]) -> MachineSample:
    """What the metrics say about one Machine (pure)."""
    meta = machine.get("metadata") or {}
    status = machine.get("status") or {}
    drain_started = None
    if meta.get("deletionTimestamp"):
        drainable, drained = _condition(machine, api.DRAINABLE), _condition(machine, api.DRAINED)
        if drainable is not None and drainable.get("status") == "True" and (
                drained is None or drained.get("status") != "True"):
            drain_started = _seconds(drainable.get("lastTransitionTime")) or _seconds(
                meta.get("deletionTimestamp"))
    return MachineSample(
        name=str(meta.get("name") or ""), namespace=str(meta.get("namespace") or ""),
        provider_id=str((machine.get("spec") or {}).get("providerID") or ""),
        node=str((status.get("nodeRef") or {}).get("name") or ""),
        api_version=str(machine.get("apiVersion") or api.API_VERSION),
        phase=str(status.get("phase") or ""),
        created=_seconds(meta.get("creationTimestamp")) or 0.0, drain_started=drain_started)


class MachineMetrics(Collector):
    def __init__(self) -> None:
        self.machines: dict[Key, MachineSample] = {}
        self.machine_sets: dict[Key, Mapping[str, Any]] = {}

    def machine_seen(self, machine: Mapping[str, Any], deleted: bool = False,
                     now: float | None = None) -> None:
        sample = machine_sample(machine)
        key = (sample.namespace, sample.name)
        if deleted:
            self.machines.pop(key, None)
            return
        previous = self.machines.get(key)
        self.machines[key] = sample
        # a phase seen entering (a restart's first listing observes nothing: it saw no change)
        if previous is not None and sample.phase and sample.phase != previous.phase:
            at = datetime.now(UTC).timestamp() if now is None else now
            phase_transition_seconds.labels(sample.phase).observe(max(0.0, at - sample.created))

    def machineset_seen(self, machine_set: Mapping[str, Any], deleted: bool = False) -> None:
        meta = machine_set.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if deleted:
            self.machine_sets.pop(key, None)
        else:
            self.machine_sets[key] = {"created": _seconds(meta.get("creationTimestamp")) or 0.0,
                                      "api_version": machine_set.get("apiVersion") or "",
                                      "status": dict(machine_set.get("status") or {})}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("mapi_machine_items",
                                "Count of machine objects currently at the apiserver",
                                value=len(self.machines))
        created = GaugeMetricFamily(
            "mapi_machine_created_timestamp_seconds",
            "Timestamp of the mapi managed Machine creation time",
            labels=["name", "namespace", "spec_provider_id", "node", "api_version", "phase"])
        draining = GaugeMetricFamily(
            "berthmaster_machine_drain_started_timestamp_seconds",
            "When the drain of a deleted Machine's Node began (Drainable turned True), while it "
            "is not Drained", labels=["name", "namespace", "node"])
        for sample in self.machines.values():
            if sample.phase:
                created.add_metric([sample.name, sample.namespace, sample.provider_id,
                                    sample.node, sample.api_version, sample.phase],
                                   sample.created)
            if sample.drain_started is not None:
                draining.add_metric([sample.name, sample.namespace, sample.node],
                                    sample.drain_started)
        yield created
        yield draining
        yield GaugeMetricFamily("mapi_machineset_items", "Count of machinesets at the apiserver",
                                value=len(self.machine_sets))
        set_created = GaugeMetricFamily(
            "mapi_machineset_created_timestamp_seconds",
            "Timestamp of the mapi managed Machineset creation time",
            labels=["name", "namespace", "api_version"])
        replicas = {
            "replicas": GaugeMetricFamily(
                "mapi_machine_set_status_replicas",
                "Information of the mapi managed Machineset's status for replicas",
                labels=["name", "namespace"]),
            "availableReplicas": GaugeMetricFamily(
                "mapi_machine_set_status_replicas_available",
                "Information of the mapi managed Machineset's status for available replicas",
                labels=["name", "namespace"]),
            "readyReplicas": GaugeMetricFamily(
                "mapi_machine_set_status_replicas_ready",
                "Information of the mapi managed Machineset's status for ready replicas",
                labels=["name", "namespace"]),
        }
        for (namespace, name), seen in self.machine_sets.items():
            set_created.add_metric([name, namespace, str(seen["api_version"])],
                                   float(seen["created"]))
            for field, family in replicas.items():
                family.add_metric([name, namespace], float(seen["status"].get(field) or 0))
        yield set_created
        yield from replicas.values()


machine_metrics = MachineMetrics()
REGISTRY.register(machine_metrics)
