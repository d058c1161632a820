"""Kubernetes Events (core/v1) about Machines, posted idempotently.

Upstream's reasons: DrainBlocked, DrainProceeds, DrainRequeued, DrainSucceeded, DrainSkipped and
Deleted (``Node "<name>" drained``) from the drain controller, FailedCreate/FailedDelete and
Created (actuators). An event's name
is derived from the Machine's uid and the reason, and its ``count`` from a counter recorded in
the Machine's status, so an operator killed after posting and before recording posts the same
event again under the same name: the API server answers 409 and nothing is duplicated. Repeats
of one reason (a drain retried five times) become one event with ``count: 5``, as client-go's
event aggregation shows them in ``kubectl describe``.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.machines.api import API_VERSION

COMPONENT = "machine-controller"
DRAIN_COMPONENT = "machine-drain-controller"

DRAIN_BLOCKED = ("DrainBlocked", "Drain blocked by pre-drain hook")
DRAIN_PROCEEDS = ("DrainProceeds", "Node drain proceeds")
DRAIN_SUCCEEDED = ("DrainSucceeded", "Node drain succeeded")
DRAIN_SKIPPED = ("DrainSkipped", "Node drain skipped")
DRAIN_REQUEUED = "DrainRequeued"  # "Node drain requeued: <error>"
NODE_DRAINED = "Deleted"  # 'Node "<name>" drained', posted before DrainSucceeded
DRAIN_TIMED_OUT = "DrainTimedOut"  # berthmaster


def event_name(involved: dict[str, Any], reason: str, series: str = "") -> str:
    meta = involved.get("metadata") or {}
    digest = hashlib.sha256(f"{meta.get('uid')}/{reason}/{series}".encode()).hexdigest()[:12]
    return f"{meta.get('name')}.{digest}"


def build_event(involved: dict[str, Any], reason: str, message: str, *, now: datetime,
                event_type: str = "Normal", count: int = 1, component: str = COMPONENT,
                series: str = "") -> dict[str, Any]:
    meta = involved.get("metadata") or {}
    stamp = format_rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(involved, reason, series),
                     "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"apiVersion": involved.get("apiVersion", API_VERSION),
                           "kind": involved.get("kind", "Machine"),
                           "name": meta.get("name"), "namespace": meta.get("namespace"),
                           "uid": meta.get("uid"),
                           "resourceVersion": meta.get("resourceVersion")},
        "reason": reason,
        "message": message,
        "type": event_type,
        "count": count,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
    }
