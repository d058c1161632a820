"""``descheduler_pods_evicted_total``, upstream descheduler's eviction counter, and how a pass
hands its counts to the operator.

Design: a pass counts every eviction it sends, by upstream's labels (``result`` ``success`` or
``error``, ``strategy``, ``profile``, ``namespace``, ``node``; kubernetes-sigs/descheduler
metrics/metrics.go ``PodsEvictedTotal``), in :data:`pods_evicted_total` on prometheus_client's
default registry. A pass is a Job's short life, so no Prometheus scrapes it: at its end it
writes the counts as its container's termination message (``/dev/termination-log``, at most
4 KiB), and the operator, which watches the Jobs it made, adds each finished Job's counts to
the same family on its own ``/metrics`` (operator/deschedulers/handlers.py). A dry run evicts
nothing but counts what it would evict as ``success``, as upstream's dry run does (it evicts
from a fake clientset, pkg/descheduler/descheduler.go): that is how a KubeDescheduler in
``Predictive`` mode reports.
"""

from __future__ import annotations

import json
import os
from collections import Counter as Tally
from collections.abc import Mapping

from prometheus_client import Counter

LABELS = ("result", "strategy", "profile", "namespace", "node")
SUCCESS, ERROR = "success", "error"
BACKGROUND = "background"  # an eviction in background assumed (EvictionsInBackground)
TERMINATION_LOG = "/dev/termination-log"
MESSAGE_LIMIT = 4096  # the kubelet keeps at most this much of a termination message

Key = tuple[str, str, str, str, str]

pods_evicted_total = Counter(
    "descheduler_pods_evicted", "Number of total evicted pods, by the result, by the strategy, "
    "by the namespace, by the node name. 'error' result means a pod could not be evicted",
    list(LABELS))

# this process's own counts (what its termination message reports)
counts: Tally[Key] = Tally()


def evicted(result: str, strategy: str, profile: str, namespace: str, node: str) -> None:
    key = (result, strategy, profile, namespace, node)
    counts[key] += 1
    pods_evicted_total.labels(*key).inc()


def termination_message(tally: Mapping[Key, int]) -> str:
    """The counts as compact JSON rows ``[result, strategy, profile, namespace, node, n]``,
    the largest first, cut to what the kubelet keeps."""
    rows: list[list[str | int]] = [[*key, n] for key, n in sorted(
        tally.items(), key=lambda item: -item[1]) if n]
    while rows:
        text = json.dumps({"podsEvicted": rows}, separators=(",", ":"))
        if len(text.encode()) <= MESSAGE_LIMIT:
            return text
        rows = rows[:-1]
    return json.dumps({"podsEvicted": []}, separators=(",", ":"))


def parse_termination_message(text: str | None) -> dict[Key, int]:
    """The counts a pass reported (nothing for anything else: a crash's message, a truncated
    one)."""
    try:
        rows = json.loads(text or "").get("podsEvicted")
    except (ValueError, AttributeError):
        return {}
    parsed: dict[Key, int] = {}
    for row in rows if isinstance(rows, list) else []:
        if (isinstance(row, list) and len(row) == 6 and all(isinstance(v, str) for v in row[:5])
                and isinstance(row[5], int) and row[5] > 0):
            key: Key = (row[0], row[1], row[2], row[3], row[4])
            parsed[key] = parsed.get(key, 0) + row[5]
    return parsed


def add_reported(reported: Mapping[Key, int]) -> None:
    for key, n in reported.items():
        pods_evicted_total.labels(*key).inc(n)


def write_termination_message(path: str | None = None) -> None:
    """Write this pass's counts where the kubelet reads them, when it is there (in a Pod)."""
    target = path or os.environ.get("BERTHMASTER_TERMINATION_LOG") or TERMINATION_LOG
    if os.path.exists(target):
        with open(target, "w") as out:
            out.write(termination_message(counts))
