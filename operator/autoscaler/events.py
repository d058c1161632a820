"""Kubernetes Events (core/v1) from the autoscaler, with upstream's component and reasons.

Design: events are named from the object's uid, the reason and the message, so the same
decision repeated every 10 s posts one event, not hundreds (the API server answers 409 for the
repeat, which is ignored); a new message (a different scale-up) is a new event. Reasons:
TriggeredScaleUp / NotTriggerScaleUp (pods), ScaleDown / ScaleDownFailed (nodes, pods),
ScaleUpTimedOut (MachineSets), as cluster-autoscaler emits them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berthmaster.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.times import format_rfc3339

COMPONENT = "cluster-autoscaler"
TRIGGERED_SCALE_UP = "TriggeredScaleUp"
NOT_TRIGGER_SCALE_UP = "NotTriggerScaleUp"
SCALE_DOWN = "ScaleDown"
SCALE_DOWN_FAILED = "ScaleDownFailed"
SCALE_UP_TIMED_OUT = "ScaleUpTimedOut"

log = logging.getLogger("berthmaster.operator.autoscaler")


def build_event(involved: Mapping[str, Any], reason: str, message: str, now: datetime,
                event_type: str = "Normal") -> dict[str, Any]:
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
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
    }


async def post(kube: KubeClient, involved: Mapping[str, Any], reason: str, message: str,
               now: datetime, event_type: str = "Normal") -> None:
    event = build_event(involved, reason, message, now, event_type)
    try:
        await kube.create(resource_path(CORE, "events", event["metadata"]["namespace"]), event)
    except KubeError as error:
        if not error.conflict:
            log.warning("event %s on %s not posted: %s", reason,
                        event["involvedObject"]["name"], error)
