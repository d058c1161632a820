"""The webhook's own metrics, on its ``--metrics-bind-address`` beside /healthz and /readyz.

``berthmaster_admission_requests_total{path, outcome}`` counts every review by how it ended:
``allowed``, ``denied``, ``fail_open`` (admitted with a warning because the webhook's own API
reads failed under ``failurePolicy: Ignore``), ``error`` (the same under ``Fail``: denied),
``too_large``, ``overloaded`` (answered 429: no slot free), ``unauthenticated`` (no client
certificate when one is required) and ``bad_request``. ``berthmaster_admission_in_flight`` is
the number of reviews being worked on. kube-apiserver's ``apiserver_admission_webhook_*``
metrics show the same calls from the caller's side.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

from berthmaster.foundation.serving import register_runtime_collectors

OUTCOMES = ("allowed", "denied", "fail_open", "error", "too_large", "overloaded",
            "unauthenticated", "bad_request")


class AdmissionMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        register_runtime_collectors(self.registry)
        self.requests = Counter("berthmaster_admission_requests_total",
                                "Admission reviews answered, by path and outcome.",
                                ["path", "outcome"], registry=self.registry)
        self.in_flight = Gauge("berthmaster_admission_in_flight",
                               "Admission reviews being worked on.", registry=self.registry)

    def count(self, path: str, outcome: str) -> None:
        self.requests.labels(path=path, outcome=outcome).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
