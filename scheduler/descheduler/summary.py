"""The pass summary: one row per strategy (considered, evicted, skipped) and the reasons.

Design: pure formatting over the strategies' ``Tally`` records, so the CLI, the operator's Job
log and the tests read the same table. The exit code is
decided here too: 0 when the pass ran (evicting or not), 1 when a strategy failed to run.
"""

from __future__ import annotations

from collections.abc import Sequence

from berthmaster.scheduler.descheduler.context import Tally

EXIT_OK, EXIT_STRATEGY_FAILED, EXIT_INVALID_POLICY, EXIT_API_ERROR = 0, 1, 2, 3


def render(tallies: Sequence[Tally], dry_run: bool) -> str:
    heading = ("strategy", "profile", "considered", "would evict" if dry_run else "evicted",
               "skipped")
    rows = [(t.strategy, t.profile, str(t.considered), str(len(t.evicted)), str(t.skipped_total))
            for t in tallies]
    widths = [max(len(r[i]) for r in [heading, *rows]) for i in range(len(heading))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(heading, widths, strict=True)).rstrip()]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    for tally in tallies:
        details = [f"    {count} x {reason}" for reason, count in tally.skipped.most_common()]
        if tally.note:
            details.insert(0, f"    note: {tally.note}")
        if tally.failure:
            details.insert(0, f"    FAILED: {tally.failure}")
        if details:
            lines.append(f"  {tally.strategy} ({tally.profile}):")
            lines += details
    total = sum(len(t.evicted) for t in tallies)
    verb = "would evict" if dry_run else "evicted"
    lines.append(f"total: {verb} {total} pod(s)")
    return "\n".join(lines)


def exit_code(tallies: Sequence[Tally]) -> int:
    return EXIT_STRATEGY_FAILED if any(t.failure for t in tallies) else EXIT_OK
