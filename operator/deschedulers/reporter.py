"""When the Descheduler runs' reporter asks the API server anything: only while there is
something to report.

Design: the reporter (handlers.report_runs) lists the Jobs labelled
``berthmaster.io/descheduler`` in the operator's namespace every few seconds; with no
Descheduler and no run of one left unfinished there is nothing to report, and the listing would
be the operator's largest cost at rest. :class:`RunReporter` keeps the names of the Descheduler
resources kopf's watch delivered (:meth:`RunReporter.seen`, from a ``@kopf.on.event``
handler: kopf already watches Deschedulers for its create/update/resume handlers, so knowing
them costs no request) and whether the last look found a run unfinished; each tick looks only
when :func:`worth_looking` says so. The reporting latency while a Descheduler exists is the
loop's interval, as before. A run left unfinished by a Descheduler just deleted keeps the
loop looking until it has finished (its evictions are then counted) or is gone with its owner.
KubeDescheduler runs carry their own label and are reported by their own runner
(kubedescheduler.py), which asks nothing without a KubeDescheduler either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any


def worth_looking(deschedulers: Collection[str], unfinished: bool) -> bool:
    """Whether a look at the runs could report anything (pure): some Descheduler exists, or
    the last look found a run not yet finished."""
    return bool(deschedulers) or unfinished


class RunReporter:
    """One tick of the reporter loop; ``report`` lists and reports the runs and returns
    whether any is still unfinished."""

    def __init__(self, report: Callable[[], Awaitable[bool]]):
        self.report = report
        self.deschedulers: set[str] = set()
        self.unfinished = False

    def seen(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name") or "")
        if not name:
            return
        if event_type == "DELETED":
            self.deschedulers.discard(name)
        else:
            self.deschedulers.add(name)

    async def step(self) -> None:
        if worth_looking(self.deschedulers, self.unfinished):
            self.unfinished = await self.report()
