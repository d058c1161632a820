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

from datetime import datetime
from typing import Any

from berthmaster.foundation.events import core_event, object_reference, stable_name
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
    return stable_name(involved, reason, series)


def build_event(involved: dict[str, Any], reason: str, message: str, *, now: datetime,
                event_type: str = "Normal", count: int = 1, component: str = COMPONENT,
                series: str = "") -> dict[str, Any]:
    meta = involved.get("metadata") or {}
    regarding = object_reference(involved, api_version=API_VERSION, kind="Machine") | {
        "resourceVersion": meta.get("resourceVersion")}
    return core_event(regarding, name=event_name(involved, reason, series),
                      namespace=meta.get("namespace") or "default", reason=reason,
                      message=message, event_type=event_type, component=component,
                      instance=component, now=now, count=count)
