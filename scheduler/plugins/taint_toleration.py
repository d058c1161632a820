"""PodToleratesNodeTaints, PodToleratesNodeNoExecuteTaints and TaintTolerationPriority.

Filter: the first NoSchedule/NoExecute taint (only NoExecute for the NoExecute variant) that no
toleration matches rejects the node, reported as kube-scheduler 1.35 does: ``node(s) had
untolerated taint(s)`` (the taint itself, ``{key: value}``, is the status's explain detail).
Score: fewer untolerated PreferNoSchedule taints is better (0..100, reversed by
the worst node). Tolerations match per ``Toleration.tolerates`` in the model; eviction timing
(tolerationSeconds) is ``model.noexecute_eviction_delay``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from berthmaster.scheduler.model import (
    PodView,
    Taint,
    Toleration,
    noexecute_eviction_delay,
    tolerates_all,
)
from berthmaster.scheduler.plugins.base import (
    MAX_PRIORITY,
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    normalize,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

NAME = "PodToleratesNodeTaints"
ALIASES = ("TaintToleration",)
NOEXECUTE_NAME = "PodToleratesNodeNoExecuteTaints"
PRIORITY_NAME = "TaintTolerationPriority"
PRIORITY_ALIASES = ("TaintToleration",)
REASON = "node(s) had untolerated taint(s)"
DETAIL = "node(s) had untolerated taint {%s: %s}"

__all__ = ["NAME", "REASON", "noexecute_eviction_delay", "untolerated_taint"]

_FILTER_EFFECTS = ("NoSchedule", "NoExecute")


def detail(taint: Taint) -> str:
    """Which taint rejected the node (``simulate --explain``; the event says only REASON)."""
    return DETAIL % (taint.key, taint.value)


def untolerated_taint(tolerations: Sequence[Toleration], taints: Sequence[Taint],
                      effects: tuple[str, ...] = _FILTER_EFFECTS) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates."""
    return tolerates_all(tolerations, (taint for taint in taints if taint.effect in effects))


def _make_check(pod: PodView, snapshot: Snapshot, effects: tuple[str, ...]) -> PrefilterResult:
    tainted = snapshot.tainted_nodes
    if not tainted:
        return None
    tolerations = pod.tolerations
    cache: dict[Taint, Status] = {}
    # the verdict depends on the node's taint set only; equal sets share one tuple
    # (model.intern_taints), so it is worked out once per distinct set: id -> (set, verdict)
    verdicts: dict[int, tuple[tuple[Taint, ...], Status | None]] = {}

    def check(node: NodeInfo) -> Status | None:
        if node.name not in tainted:
            return None
        taints = node.taints
        known = verdicts.get(id(taints))
        if known is not None and known[0] is taints:
            return known[1]
        bad = untolerated_taint(tolerations, taints, effects)
        status = None
        if bad is not None:
            status = cache.get(bad)
            if status is None:
                status = cache[bad] = Status((REASON,), True, detail(bad))
        verdicts[id(taints)] = (taints, status)
        return status

    # the nodes this pod's tolerations let in depend only on the nodes: worked out once per
    # distinct toleration set until a node changes, and declared to the engine, which then
    # walks those nodes alone instead of rejecting the others one by one
    key = ("tolerated-nodes", effects, tolerations)
    cache_of_nodes = snapshot.node_cache
    if key in cache_of_nodes:
        allowed = cache_of_nodes[key]
    else:
        barred = set()
        for name in tainted:
            info = snapshot.node(name)
            if info is not None and check(info) is not None:
                barred.add(name)
        allowed = cache_of_nodes[key] = frozenset(
            name for name in snapshot.nodes if name not in barred) if barred else None
    if allowed is None:
        return None  # every taint is tolerated: nothing to reject
    return NarrowedCheck(check, allowed, exact=True)


@dataclass
class TaintToleration(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("Node/Add", "Node/UpdateNodeTaint", "Pod/UpdatePodToleration")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        return _make_check(pod, snapshot, _FILTER_EFFECTS)


@dataclass
class NoExecuteTaintToleration(Predicate):
    NAME = NOEXECUTE_NAME
    EVENTS = ("Node/Add", "Node/UpdateNodeTaint")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        return _make_check(pod, snapshot, ("NoExecute",))


def intolerable_prefer_no_schedule(pod: PodView, node: NodeInfo) -> int:
    prefer = [t for t in pod.tolerations if not t.effect or t.effect == "PreferNoSchedule"]
    count = 0
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in prefer):
            count += 1
    return count


@dataclass
class TaintTolerationPriority(Priority):
    NAME = PRIORITY_NAME
    ALIASES = PRIORITY_ALIASES

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        if not snapshot.prefer_no_schedule_nodes:
            return MAX_PRIORITY  # every node 0 untolerated: reversed, all score the most
        flagged = snapshot.prefer_no_schedule_nodes
        raw = [intolerable_prefer_no_schedule(pod, n) if n.name in flagged else 0 for n in nodes]
        return normalize(raw, reverse=True)
