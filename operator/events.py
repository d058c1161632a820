"""Kubernetes Events (core/v1) that the operator's capabilities post, deduplicated by name.

Design: an event is named from the object's uid, the reason and the message, so the same
decision repeated every loop posts one event, not hundreds (the API server answers 409 for the
repeat, which is ignored); a new message is a new event. Each capability passes its upstream
component (``cluster-autoscaler``, the descheduler operator's); a failed post is logged, never
raised: an event is a report, not a step of the work.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berthmaster.foundation.events import core_event, object_reference, stable_name
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path

log = logging.getLogger("berthmaster.operator.events")


def build_event(involved: Mapping[str, Any], reason: str, message: str, now: datetime,
                event_type: str, component: str) -> dict[str, Any]:
    namespace = (involved.get("metadata") or {}).get("namespace") or "default"
    return core_event(object_reference(involved), name=stable_name(involved, reason, message),
                      namespace=namespace, reason=reason, message=message[:1024],
                      event_type=event_type, component=component, instance=component, now=now)


async def post(kube: KubeClient, involved: Mapping[str, Any], reason: str, message: str,
               now: datetime, event_type: str, component: str) -> None:
    event = build_event(involved, reason, message, now, event_type, component)
    try:
        await kube.create(resource_path(CORE, "events", event["metadata"]["namespace"]), event)
    except KubeError as error:
        if not error.conflict:
            log.warning("event %s on %s not posted: %s", reason,
                        event["involvedObject"]["name"], error)
