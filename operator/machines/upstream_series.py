"""Metric families under exactly machine-api-operator's series names (pkg/metrics).

Upstream's Go client exposes a counter under the name it was given: ``mapi_instance_create_failed``
has no ``_total`` suffix, while ``mapi_machinehealthcheck_remediation_success_total`` carries one
in its name. prometheus_client's ``Counter`` would rename both, so these families render their
samples themselves: labelled values, ``inc``/``set`` as upstream's ``With(labels).Inc()``/
``Set()``, ``remove`` as ``Delete(labels)``. prometheus_client's text exposition declares every
counter family as ``<name>_total``, so the two counters without that suffix are declared
``untyped`` (the series, its name and labels are upstream's; ``rate()`` works on it alike).

- ``mapi_instance_create_failed{name,namespace,reason}``, ``mapi_instance_delete_failed{...}``
  (pkg/metrics/metrics.go): a provider's instance create or delete that failed, the reason
  being the error's text as upstream's providers register it;
- ``mapi_machinehealthcheck_nodes_covered{name,namespace}``: the Machines a MachineHealthCheck
  selects (its targets), removed with the check;
- ``mapi_machinehealthcheck_remediation_success_total{name,namespace}``: Machines it deleted;
- ``mapi_machinehealthcheck_short_circuit{name,namespace}``: 1 while remediation is restricted
  by ``maxUnhealthy``, else 0 (pkg/metrics/machinehealthcheck.go).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


class Series(Collector):
    def __init__(self, name: str, documentation: str, labels: tuple[str, ...],
                 kind: str = "gauge"):
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self.kind = kind
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *values: str) -> None:
        self.values[values] = self.values.get(values, 0.0) + 1.0

    def set(self, value: float, *values: str) -> None:
        self.values[values] = float(value)

    def remove(self, *values: str) -> None:
        self.values.pop(values, None)

    def get(self, *values: str) -> float | None:
        return self.values.get(values)

    def collect(self) -> Iterator[Metric]:
        family_name = self.name.removesuffix("_total") if self.kind == "counter" else self.name
        family = Metric(family_name, self.documentation, self.kind)
        for values, value in sorted(self.values.items()):
            family.add_sample(self.name, dict(zip(self.labels, values, strict=True)), value)
        yield family


MACHINE = ("name", "namespace", "reason")
MHC = ("name", "namespace")

instance_create_failed = Series("mapi_instance_create_failed",
                                "Number of times provider instance create has failed.",
                                MACHINE, "unknown")
instance_delete_failed = Series("mapi_instance_delete_failed",
                                "Number of times provider instance delete has failed.",
                                MACHINE, "unknown")
mhc_nodes_covered = Series("mapi_machinehealthcheck_nodes_covered",
                           "Number of nodes covered by MachineHealthChecks", MHC)
mhc_remediation_success = Series("mapi_machinehealthcheck_remediation_success_total",
                                 "Number of successful remediations performed by "
                                 "MachineHealthChecks", MHC, "counter")
mhc_short_circuit = Series("mapi_machinehealthcheck_short_circuit",
                           "Short circuit status for MachineHealthCheck (0=no, 1=yes)", MHC)

for _series in (instance_create_failed, instance_delete_failed, mhc_nodes_covered,
                mhc_remediation_success, mhc_short_circuit):
    REGISTRY.register(_series)
