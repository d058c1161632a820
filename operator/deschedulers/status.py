"""Pure status decisions for a Descheduler: conditions and the last run's outcome.

Design: the handlers read a Job (or the newest Job of a CronJob) and ask :func:`run_outcome`
what it says; :func:`condition` builds a condition that keeps its ``lastTransitionTime`` when
the status does not change, so re-reconciling does not churn the status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.times import format_rfc3339

POLICY_VALID = "PolicyValid"
# berthmaster's: the spec stays within what the cluster administrator allows (runs.py)
SPEC_ALLOWED = "SpecAllowed"
READY = "Ready"
LAST_RUN_SUCCEEDED = "LastRunSucceeded"
# berthmaster's: a policy that balances by actual usage has the metrics API it reads
# (scheduler/descheduler/usage_metrics.py); False stops the run before any Job
METRICS_AVAILABLE = "MetricsAvailable"


def now_stamp() -> str:
    return format_rfc3339(datetime.now(UTC))


def condition(
    existing: Sequence[Mapping[str, Any]] | None, type_: str, status: bool, reason: str,
    message: str, generation: int | None = None,
) -> dict[str, Any]:
    value = "True" if status else "False"
    previous = next((c for c in existing or () if c.get("type") == type_), None)
    stamp = previous["lastTransitionTime"] if previous and previous.get("status") == value \
        and previous.get("lastTransitionTime") else now_stamp()
    found: dict[str, Any] = {"type": type_, "status": value, "reason": reason,
                             "message": message, "lastTransitionTime": stamp}
    if generation is not None:
        found["observedGeneration"] = generation
    return found


def merge_conditions(
    existing: Sequence[Mapping[str, Any]] | None, *updates: dict[str, Any]
) -> list[dict[str, Any]]:
    changed = {u["type"]: u for u in updates}
    kept = [dict(c) for c in existing or () if c.get("type") not in changed]
    return kept + list(updates)


def run_outcome(job: Mapping[str, Any]) -> str:
    """Pending, Running, Succeeded or Failed, from a Job's status."""
    status = job.get("status") or {}
    for c in status.get("conditions") or ():
        if c.get("status") == "True" and c.get("type") == "Complete":
            return "Succeeded"
        if c.get("status") == "True" and c.get("type") == "Failed":
            return "Failed"
    if status.get("succeeded"):
        return "Succeeded"
    if status.get("failed"):
        return "Failed"
    return "Running" if status.get("startTime") or status.get("active") else "Pending"


def newest_run(jobs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Job started last (its startTime, else its creation time), or None."""
    def started(job: Mapping[str, Any]) -> str:
        return str((job.get("status") or {}).get("startTime")
                   or (job.get("metadata") or {}).get("creationTimestamp") or "")

    return max(jobs, key=started, default=None)
