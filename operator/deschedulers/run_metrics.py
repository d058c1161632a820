"""``berthmaster_descheduler_runs_total{descheduler,result}``: the Descheduler runs (Jobs) this
operator process saw finish, by Descheduler and result (``succeeded`` or ``failed``).

Design: upstream descheduler has no such metric (a run is a Job whose pod nobody scrapes); the
operator already looks at every run's Job once when it finishes (:mod:`.evictions`), and counts
it there. A Descheduler's two series are created at 0 when the operator first sees it, so that
Prometheus' ``increase()`` sees its first failed run (a series that appears at 1 has no earlier
sample to increase from). Like every counter, it restarts from zero with its process; a run that
finished before the process started is not counted again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter

from berthmaster.operator.deschedulers.build import OWNER_LABEL
from berthmaster.operator.deschedulers.status import run_outcome

RESULTS = ("succeeded", "failed")

RUNS = Counter("berthmaster_descheduler_runs",
               "Descheduler runs (Jobs) finished since the operator started, by Descheduler "
               "and result", ["descheduler", "result"])


def run_result(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(Descheduler, result) of a finished run's Job; None while it runs or when no
    Descheduler owns it (pure)."""
    outcome = run_outcome(job)
    owner = ((job.get("metadata") or {}).get("labels") or {}).get(OWNER_LABEL)
    if not owner or outcome not in ("Succeeded", "Failed"):
        return None
    return str(owner), outcome.lower()


def descheduler_seen(name: str) -> None:
    """Create the Descheduler's series at 0 (no-op when they exist)."""
    for result in RESULTS:
        RUNS.labels(name, result)


def count_run(job: Mapping[str, Any]) -> None:
    """Count a finished run (called once per Job, by :mod:`.evictions`)."""
    labels = run_result(job)
    if labels is not None:
        RUNS.labels(*labels).inc()
