"""Machine API conditions (``type``, ``status``, ``severity``, ``reason``, ``message``, times).

Pure: conditions are plain dicts as they travel in JSON. :func:`set_condition` keeps
``lastTransitionTime`` when the status does not change, as upstream's ``conditions.Set`` does, so
the time a condition turned False or True stays truthful across reconciles and restarts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from berthmaster.operator.machines.api import SEVERITY_WARNING

Condition = dict[str, Any]


def timestamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def true_condition(kind: str, message: str = "", reason: str = "") -> Condition:
    condition: Condition = {"type": kind, "status": "True"}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def false_condition(kind: str, reason: str, message: str,
                    severity: str = SEVERITY_WARNING) -> Condition:
    return {"type": kind, "status": "False", "severity": severity, "reason": reason,
            "message": message}


def get_condition(conditions: list[Condition] | None, kind: str) -> Condition | None:
    return next((c for c in conditions or [] if c.get("type") == kind), None)


def is_true(conditions: list[Condition] | None, kind: str) -> bool:
    found = get_condition(conditions, kind)
    return found is not None and found.get("status") == "True"


def set_condition(conditions: list[Condition] | None, new: Condition,
                  now: datetime) -> list[Condition]:
    """A new list with ``new`` in place of the condition of its type (order kept, new last)."""
    result: list[Condition] = []
    replaced = False
    for existing in conditions or []:
        if existing.get("type") != new["type"]:
            result.append(existing)
            continue
        result.append(_merged(existing, new, now))
        replaced = True
    if not replaced:
        result.append({**new, "lastTransitionTime": timestamp(now)})
    return result


def _merged(existing: Condition, new: Condition, now: datetime) -> Condition:
    if existing.get("status") == new.get("status") and existing.get("lastTransitionTime"):
        return {**new, "lastTransitionTime": existing["lastTransitionTime"]}
    return {**new, "lastTransitionTime": timestamp(now)}
