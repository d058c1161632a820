"""The evictions of finished descheduler runs, added to the operator's
``descheduler_pods_evicted_total`` (scheduler/descheduler/metrics.py explains the hand-over).

Design: when a Job the operator made has finished, its pods' termination messages carry the
pass's counts; each Job is counted once (by uid, in memory). A Job that finished before this
operator process started is not counted: its counts were exported by the process that saw it
(a counter restarts from zero with its process, and Prometheus's ``rate`` and ``increase``
expect exactly that), so a restart does not report old evictions again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.deschedulers.run_metrics import count_run
from berthmaster.operator.deschedulers.status import run_outcome
from berthmaster.scheduler.descheduler.metrics import add_reported, parse_termination_message

log = logging.getLogger("berthmaster.operator.deschedulers")

STARTED = time.time()
_counted: set[str] = set()


def finished_at(job: Mapping[str, Any]) -> float | None:
    status = job.get("status") or {}
    stamp = status.get("completionTime") or next(
        (c.get("lastTransitionTime") for c in status.get("conditions") or ()
         if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def reported_by(pods: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str, str, str], int]:
    """The counts every container of the pods reported (pure)."""
    total: dict[tuple[str, str, str, str, str], int] = {}
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or ():
            terminated = (container.get("state") or {}).get("terminated") or {}
            for key, n in parse_termination_message(terminated.get("message")).items():
                total[key] = total.get(key, 0) + n
    return total


async def count_finished_run(client: KubeClient, job: Mapping[str, Any],
                             started: float = STARTED
                             ) -> dict[tuple[str, str, str, str, str], int] | None:
    """Add a newly finished run's counts to the metrics and return them (None: not finished,
    already counted, or finished before this process started); count the run itself
    (:mod:`.run_metrics`)."""
    meta = job.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if not uid or uid in _counted or run_outcome(job) not in ("Succeeded", "Failed"):
        return None
    _counted.add(uid)
    finished = finished_at(job)
    if finished is not None and finished < started:
        return None
    count_run(job)
    try:
        pods, _ = await client.list_all(resource_path(CORE, "pods", meta.get("namespace")),
                                        labelSelector=f"batch.kubernetes.io/controller-uid={uid}")
    except KubeError as error:
        log.warning("cannot read the pods of Job %s/%s to count its evictions: %s",
                    meta.get("namespace"), meta.get("name"), error)
        return None
    counts = reported_by(pods)
    add_reported(counts)
    return counts
