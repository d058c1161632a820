"""The descheduler's scheduled runs under the campaign, and their liveness.

Every ``every`` seconds the campaign runs one pass of ``berthmaster deschedule`` (the CLI the
operator's CronJob runs, operator/deschedulers/build.py) against the cluster under churn and
faults. Each scheduled run must complete: exit 0 within :data:`RUN_BOUND` seconds. A run still
running then is killed and is a breach (a hung pass would hold the CronJob's only Job:
``concurrencyPolicy: Forbid`` skips every later run), and so is a run that exits non-zero,
unless it overlapped a span in which the API server or etcd was down (a kill-and-restart
fault, ``Stage.outages``, with :data:`OUTAGE_GRACE` either side): the command then says it
cannot reach or read the API server (exit 3, scheduler/descheduler/command.py) or a strategy's
evictions failed (exit 1), which is what it should say; such runs are counted apart. The pure
judgement is :func:`judge`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from berthmaster.tooling.chaos.checker import Checker
from berthmaster.tooling.python import BERTHMASTER_CLI

RUN_BOUND = 120.0  # seconds one pass may take
OUTAGE_GRACE = 10.0  # seconds around an outage in which a failed pass is the outage's
TAIL = 300  # characters of a failed run's output quoted in its breach


@dataclass
class Runs:
    """What the scheduled runs came to."""

    started: int = 0
    completed: int = 0
    failed_in_outage: int = 0
    exit_codes: dict[int, int] = field(default_factory=dict)


def judge(exit_code: int | None, started: float, ended: float,
          outages: Sequence[tuple[float, float]], bound: float = RUN_BOUND) -> tuple[str, str]:
    """One run's verdict: ``completed``, ``outage`` (failed while the control plane was down)
    or ``breach``, with what happened (``exit_code`` None: killed at ``bound``)."""
    if exit_code is None:
        return "breach", f"a descheduler run did not finish within {bound:.0f}s (killed)"
    if exit_code == 0:
        return "completed", f"completed in {ended - started:.1f}s"
    overlapped = [(s, e) for s, e in outages
                  if s - OUTAGE_GRACE <= ended and started <= e + OUTAGE_GRACE]
    if overlapped:
        return "outage", f"exit {exit_code} while the control plane was down"
    return "breach", (f"a descheduler run exited {exit_code} after {ended - started:.1f}s "
                      "with the control plane up")


async def scheduled(kubeconfig: Path, workdir: Path, policy: str, every: float,
                    outages: Sequence[tuple[float, float]], checker: Checker,
                    stop: asyncio.Event, runs: Runs) -> None:
    """Run the descheduler every ``every`` seconds until ``stop``; judge each run."""
    policy_file = workdir / "descheduler-policy.yaml"
    policy_file.write_text(policy)
    logfile = workdir / "descheduler.log"
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        if stop.is_set():
            return
        offset = logfile.stat().st_size if logfile.exists() else 0
        runs.started += 1
        began = time.time()  # wall clock, as the outages are recorded
        with logfile.open("ab") as sink:
            process = await asyncio.create_subprocess_exec(
                *BERTHMASTER_CLI, "deschedule",
                "--policy-config-file", str(policy_file), "--kubeconfig", str(kubeconfig),
                stdout=sink, stderr=sink)
            code: int | None
            try:
                code = await asyncio.wait_for(process.wait(), RUN_BOUND)
            except TimeoutError:
                process.kill()
                await process.wait()
                code = None
        verdict, what = judge(code, began, time.time(), outages)
        if code is not None:
            runs.exit_codes[code] = runs.exit_codes.get(code, 0) + 1
        if verdict == "completed":
            runs.completed += 1
        elif verdict == "outage":
            runs.failed_in_outage += 1
        else:
            output = logfile.read_bytes()[offset:].decode(errors="replace")[-TAIL:]
            checker.breach(f"descheduler run {runs.started}: {what}; its output ends: "
                           f"{output!r} ({logfile})")

