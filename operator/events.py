"""Kubernetes Events (core/v1) that the operator's capabilities post, deduplicated by name.

Design: an event is named from the object's uid, the reason and the message, so the same
decision repeated every loop posts one event, not hundreds (the API server answers 409 for the
repeat, which is ignored); a new message is a new event. Each capability passes its upstream
component (``cluster-autoscaler``, the descheduler operator's); a failed post is logged, never
raised: an event is a report, not a step of the work.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.times import format_rfc3339

log = logging.getLogger("berthmaster.operator.events")


def build_event(involved: Mapping[str, Any], reason: str, message: str, now: datetime,
                event_type: str, component: str) -> dict[str, Any]:
    meta = involved.get("metadata") or {}
    digest = hashlib.sha256(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:12]
    stamp = format_rfc3339(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{digest}",
                     "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"apiVersion": involved.get("apiVersion", "v1"),
                           "kind": involved.get("kind", ""), "name": meta.get("name"),
                           "namespace": meta.get("namespace"), "uid": meta.get("uid")},
        "reason": reason, "message": message[:1024], "type": event_type, "count": 1,
        "firstTimestamp": stamp, "lastTimestamp": stamp,
        "source": {"component": component}, "reportingComponent": component,
        "reportingInstance": component,
    }


async def post(kube: KubeClient, involved: Mapping[str, Any], reason: str, message: str,
               now: datetime, event_type: str, component: str) -> None:
    event = build_event(involved, reason, message, now, event_type, component)
    try:
        await kube.create(resource_path(CORE, "events", event["metadata"]["namespace"]), event)
    except KubeError as error:
        if not error.conflict:
            log.warning("event %s on %s not posted: %s", reason,
                        event["involvedObject"]["name"], error)
