"""The body of a core/v1 Event: the one builder the scheduler and the operator post through.

Design: callers differ only in what they pass — the event's name (the scheduler's is random, as
client-go's recorder names events ``<object>.<unique suffix>``; the operator's is derived from
the object's uid so a repeat is refused by the API server with 409, see :func:`stable_name`),
the reference to the object (:func:`object_reference`), the component and instance, and the
message. The fields are those client-go's legacy event recorder sets
(staging/src/k8s.io/client-go/tools/record/event.go ``makeEvent``, with the
``reportingComponent``/``reportingInstance`` the events.k8s.io pipeline adds): ``count``,
``firstTimestamp`` and ``lastTimestamp`` as core/v1 wants them, ``source.component``. The
descheduler posts events.k8s.io/v1 Events instead, a different object, built in
``berthmaster.scheduler.descheduler.evictor``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berthmaster.foundation.times import format_rfc3339

JSON = dict[str, Any]


def object_reference(obj: Mapping[str, Any], *, api_version: str = "v1",
                     kind: str = "") -> JSON:
    """An ObjectReference to ``obj``; ``api_version``/``kind`` when the object carries none."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion", api_version), "kind": obj.get("kind", kind),
            "name": meta.get("name"), "namespace": meta.get("namespace"),
            "uid": meta.get("uid")}


def stable_name(obj: Mapping[str, Any], *parts: str) -> str:
    """``<name>.<12 hex>``, the hex from the object's uid and ``parts`` (a reason, a message):
    the same event posted twice has the same name, and the API server keeps one."""
    meta = obj.get("metadata") or {}
    key = "/".join((str(meta.get("uid")), *parts))
    return f"{meta.get('name')}.{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def core_event(regarding: Mapping[str, Any], *, name: str, namespace: str, reason: str,
               message: str, event_type: str, component: str, instance: str, now: datetime,
               count: int = 1, action: str | None = None,
               related: Mapping[str, Any] | None = None) -> JSON:
    """A core/v1 Event about the object ``regarding`` references (an ObjectReference)."""
    stamp = format_rfc3339(now)
    event: JSON = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": dict(regarding),
        "reason": reason, "message": message, "type": event_type, "count": count,
        "firstTimestamp": stamp, "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": instance,
    }
    if action is not None:
        event["action"] = action
    if related is not None:
        event["related"] = dict(related)
    return event
