"""Machine API conditions (``type``, ``status``, ``severity``, ``reason``, ``message``, times).

Pure: conditions are plain dicts as they travel in JSON. :func:`set_condition` behaves as
upstream's ``conditions.Set``: ``lastTransitionTime`` is kept while the condition's state
(status, reason, severity and message) is unchanged and renewed when any of them changes, so the
time a condition took its present form stays truthful across reconciles and restarts; and the
list is kept sorted by type, the order ``kubectl describe`` shows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from berthmaster.foundation.times import format_rfc3339
from berthmaster.operator.machines.api import SEVERITY_WARNING

Condition = dict[str, Any]



def true_condition(kind: str, message: str = "", reason: str = "") -> Condition:
    condition: Condition = {"type": kind, "status": "True"}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def unknown_condition(kind: str, reason: str, message: str) -> Condition:
    return {"type": kind, "status": "Unknown", "reason": reason, "message": message}


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
    """A new list with ``new`` in place of the condition of its type, sorted by type."""
    result: list[Condition] = []
    replaced = False
    for existing in conditions or []:
        if existing.get("type") != new["type"]:
            result.append(existing)
            continue
        result.append(_merged(existing, new, now))
        replaced = True
    if not replaced:
        result.append({**new, "lastTransitionTime": format_rfc3339(now)})
    return sorted(result, key=lambda c: str(c.get("type", "")))


STATE = ("type", "status", "reason", "severity", "message")


def same_state(a: Condition, b: Condition) -> bool:
    """Upstream's ``hasSameState``: equal in every field but lastTransitionTime."""
    return all((a.get(field) or "") == (b.get(field) or "") for field in STATE)


def _merged(existing: Condition, new: Condition, now: datetime) -> Condition:
    if same_state(existing, new) and existing.get("lastTransitionTime"):
        return {**new, "lastTransitionTime": existing["lastTransitionTime"]}
    return {**new, "lastTransitionTime": format_rfc3339(now)}
