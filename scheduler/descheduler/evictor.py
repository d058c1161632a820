"""Evicting what the strategies chose: limits, nodeFit, the Eviction API, events, dry runs.

Design: a strategy's decision is a generator of candidates; :func:`drive` (async, for the real
pass) and :func:`drive_planned` (sync, for benchmarks and offline plans) feed each candidate to
an attempt function and send back whether the pod went, so the strategy can keep its
bookkeeping (LowNodeUtilization stops once a node is back under target).

:class:`EvictionBook` is the pure part: the policy's per-node, per-namespace and total limits
and the DefaultEvictor's pre-eviction ``nodeFit`` check. :class:`Evictor` adds the I/O: a POST
of a ``policy/v1`` Eviction to ``pods/<name>/eviction`` (so PodDisruptionBudgets hold: a 429 is
a refusal, recorded and skipped), then an ``events.k8s.io/v1`` Event on the pod with upstream's
strings (reason: the strategy; action ``Descheduled``; note ``pod evicted from <node> node by
sigs.k8s.io/descheduler``). With the policy's ``evictionFailureEventNotification``, an eviction
that a limit or the API refuses gets a ``Warning`` Event too (reason ``EvictionFailed``, note
``pod eviction from <node> node by sigs.k8s.io/descheduler failed: <why>``), as upstream's
PodEvictor.EvictPod. With ``dry_run`` nothing is sent; the candidate is printed instead and
counted as it would have been, in the pass's tally and in ``descheduler_pods_evicted_total``
(result ``success``), as upstream's dry run counts evictions from its fake clientset.

With the ``EvictionsInBackground`` gate (scheduler/descheduler/features.py), pods annotated
``request-evict-only`` are evicted as upstream's PodEvictor does under it: one that already
carries ``eviction-in-progress`` (and has not finished) is not asked again and counts against
the limits from the start of the pass (:func:`in_background`), and a 429 whose message says
"Eviction triggered evacuation" is an eviction in progress (result ``background``), not a
refusal (:func:`background_outcome`).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.foundation.times import format_rfc3339_micro
from berthmaster.scheduler.descheduler import metrics
from berthmaster.scheduler.descheduler.context import (
    Candidate,
    CandidateStream,
    StrategyContext,
    uid,
)

ACTION = "Descheduled"
REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
EVACUATION_TEXT = "Eviction triggered evacuation"
FINISHED_PHASES = ("Succeeded", "Failed")
EVICTED, REFUSED, IGNORED = "evicted", "refused", "ignored"  # Evictor._evict's outcomes
FAILED_REASON = "EvictionFailed"
FAILED_NOTE = "pod eviction from {node} node by sigs.k8s.io/descheduler failed: {why}"
REPORTING_CONTROLLER = "berthmaster.io/descheduler"
NOTE = "pod evicted from {node} node by sigs.k8s.io/descheduler"


@dataclass
class EvictionBook:
    """Counts evictions against the policy's limits (None: unlimited)."""

    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None
    by_node: Counter[str] = field(default_factory=Counter)
    by_namespace: Counter[str] = field(default_factory=Counter)
    count: int = 0

    def limit_reached(self, candidate: Candidate) -> tuple[str, str] | None:
        """The limit this candidate would exceed: (our sentence, upstream's event wording)."""
        namespace = (candidate.pod.get("metadata") or {}).get("namespace", "")
        if self.total is not None and self.count >= self.total:
            return ("maximum number of evicted pods per run reached (maxNoOfPodsToEvictTotal)",
                    f"total eviction limit exceeded ({self.total})")
        node = candidate.node_name
        if node and self.per_node is not None and self.by_node[node] >= self.per_node:
            return ("maximum number of pods per node reached (maxNoOfPodsToEvictPerNode)",
                    f"node eviction limit exceeded ({self.per_node})")
        if self.per_namespace is not None and self.by_namespace[namespace] >= self.per_namespace:
            return ("maximum number of pods per namespace reached "
                    "(maxNoOfPodsToEvictPerNamespace)",
                    f"namespace eviction limit exceeded ({self.per_namespace})")
        return None

    def refusal(self, candidate: Candidate, ctx: StrategyContext) -> str | None:
        """Why this candidate may not go now (limits, then nodeFit), or None."""
        limit = self.limit_reached(candidate)
        if limit:
            return limit[0]
        if ctx.settings.node_fit and not ctx.evictor_fits_other_node(candidate.pod):
            return ("pod does not fit on any other node because of nodeSelector(s), Taint(s), "
                    "or nodes marked as unschedulable")
        return None

    def record(self, candidate: Candidate) -> None:
        self.count += 1
        if candidate.node_name:
            self.by_node[candidate.node_name] += 1
        self.by_namespace[(candidate.pod.get("metadata") or {}).get("namespace", "")] += 1


def in_background(pod: dict[str, Any]) -> bool:
    """An eviction in background already under way (evictions.go's pod informer handler)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return (REQUEST_EVICT_ONLY in annotations and EVICTION_IN_PROGRESS in annotations
            and (pod.get("status") or {}).get("phase") not in FINISHED_PHASES)


def background_outcome(pod: dict[str, Any], error: KubeError) -> str | None:
    """evictions.go PodEvictor.evictPod under EvictionsInBackground: "background" when the
    refusal is the evacuation a request-evict-only pod asked for, "finished" when that pod has
    already completed (nothing to count), None for an ordinary refusal."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if (REQUEST_EVICT_ONLY not in annotations or not error.too_many_requests
            or EVACUATION_TEXT not in error.message):
        return None
    return ("finished" if (pod.get("status") or {}).get("phase") in FINISHED_PHASES
            else "background")


def accept(candidate: Candidate, ctx: StrategyContext) -> None:
    """Book a successful (or dry-run) eviction in the strategy's tally and the pass state."""
    ctx.tally.evicted.append(candidate.key)
    ctx.state.evicted.add(uid(candidate.pod))


def build_eviction(pod: dict[str, Any], grace_period_seconds: int | None = None) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    body: dict[str, Any] = {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
    }
    if grace_period_seconds is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
    return body


def build_event(pod: dict[str, Any], strategy: str, now: datetime | None = None,
                failure: str | None = None) -> dict[str, Any]:
    """An events.k8s.io/v1 Event on the evicted pod, with upstream's reason/action/note; with
    ``failure``, the Warning upstream records when the eviction did not happen."""
    meta = pod.get("metadata") or {}
    stamp = format_rfc3339_micro(now or datetime.now(UTC))
    node = (pod.get("spec") or {}).get("nodeName", "")
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        # client-go's naming: <object>.<hex nanoseconds>
        "metadata": {"name": f"{meta.get('name')}.{time.time_ns():x}",
                     "namespace": meta.get("namespace")},
        "eventTime": stamp,
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": os.environ.get("HOSTNAME") or "berthmaster-deschedule",
        "action": ACTION,
        "reason": FAILED_REASON if failure is not None else strategy or "NotSet",
        "type": "Warning" if failure is not None else "Normal",
        "note": (FAILED_NOTE.format(node=node, why=failure) if failure is not None
                 else NOTE.format(node=node)),
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                      "namespace": meta.get("namespace"), "uid": meta.get("uid")},
    }


def _metric_labels(candidate: Candidate, ctx: StrategyContext) -> tuple[str, str, str, str]:
    """descheduler_pods_evicted_total's strategy, profile, namespace and node."""
    namespace = (candidate.pod.get("metadata") or {}).get("namespace")
    return (ctx.tally.strategy, ctx.tally.profile, str(namespace or ""),
            candidate.node_name or "")


class Evictor:
    """Evicts through the API (or pretends to, in a dry run), within the policy's limits."""

    def __init__(
        self,
        kube: KubeClient | None,
        book: EvictionBook,
        dry_run: bool,
        grace_period_seconds: int | None = None,
        say: Callable[[str], None] = print,
        failure_events: bool = False,
        background: bool = False,
    ):
        if kube is None and not dry_run:
            raise ValueError("an Evictor that evicts needs a KubeClient")
        self.kube = kube
        self.book = book
        self.dry_run = dry_run
        self.grace_period_seconds = grace_period_seconds
        self.say = say
        self.failure_events = failure_events
        self.background = background  # the EvictionsInBackground gate

    def count_in_background(self, pods: Iterable[dict[str, Any]]) -> int:
        """Book the evictions in background already under way against the limits (upstream's
        evictionRequestsTotal/PerNode/PerNamespace); how many there are."""
        found = 0
        for pod in pods:
            if self.background and in_background(pod):
                self.book.record(Candidate(pod, ""))
                found += 1
        return found

    async def attempt(self, candidate: Candidate, ctx: StrategyContext) -> bool:
        if self.background and in_background(candidate.pod):
            # "Eviction in background already requested (ignoring)": as good as evicted
            ctx.tally.skipped["eviction in background already requested"] += 1
            ctx.state.evicted.add(uid(candidate.pod))
            return True
        limit = self.book.limit_reached(candidate)
        refusal = self.book.refusal(candidate, ctx)
        if refusal:
            ctx.tally.skipped[refusal] += 1
            if limit and self.failure_events and not self.dry_run:
                await self._record_event(candidate, ctx, failure=limit[1])
            return False
        if self.dry_run:
            self.say(f"[dry-run] {ctx.tally.strategy}: would evict {candidate.key} from "
                     f"{candidate.node_name}: {candidate.why}")
            # upstream's dry run evicts from a fake clientset (pkg/descheduler/descheduler.go),
            # so PodEvictor.EvictPod counts it as a success (pkg/descheduler/evictions)
            metrics.evicted(metrics.SUCCESS, *_metric_labels(candidate, ctx))
        else:
            outcome = await self._evict(candidate, ctx)
            if outcome == IGNORED:  # in background: as good as evicted, counted no further
                ctx.state.evicted.add(uid(candidate.pod))
                return True
            if outcome != EVICTED:
                return False
            self.say(f"{ctx.tally.strategy}: evicted {candidate.key} from {candidate.node_name}: "
                     f"{candidate.why}")
            await self._record_event(candidate, ctx)
        self.book.record(candidate)
        accept(candidate, ctx)
        return True

    async def _evict(self, candidate: Candidate, ctx: StrategyContext) -> str:
        """POST the Eviction: EVICTED, REFUSED, or IGNORED (an eviction in background assumed,
        or the pod it concerns already finished: evictions.go evictPod's ``ignore``)."""
        assert self.kube is not None
        meta = candidate.pod.get("metadata") or {}
        path = resource_path(CORE, "pods", meta.get("namespace"), meta.get("name"), "eviction")
        labels = _metric_labels(candidate, ctx)
        try:
            await self.kube.create(path, build_eviction(candidate.pod, self.grace_period_seconds))
        except KubeError as error:
            outcome = background_outcome(candidate.pod, error) if self.background else None
            if outcome == "finished":  # "Ignoring eviction of a completed/failed pod"
                return IGNORED
            if outcome == "background":  # "Eviction in background assumed"
                metrics.evicted(metrics.BACKGROUND, *labels)
                self.book.record(candidate)  # the assumed request counts against the limits
                ctx.tally.skipped["eviction in background assumed"] += 1
                self.say(f"{ctx.tally.strategy}: eviction in background assumed for "
                         f"{candidate.key}")
                return IGNORED
            metrics.evicted(metrics.ERROR, *labels)
            if error.too_many_requests:
                ctx.tally.skipped[f"eviction refused (429 Too Many Requests): {error.message}"] += 1
                why = f'error when evicting pod (ignoring) "{meta.get("name")}": {error.message}'
            elif error.not_found:
                ctx.tally.skipped["pod not found when evicting"] += 1
                why = f'pod not found when evicting "{meta.get("name")}": {error.message}'
            else:
                ctx.tally.skipped[f"eviction failed: {error.status} {error.reason}"] += 1
                why = error.message
            self.say(f"{ctx.tally.strategy}: could not evict {candidate.key}: {error}")
            if self.failure_events:
                await self._record_event(candidate, ctx, failure=why)
            return REFUSED
        metrics.evicted(metrics.SUCCESS, *labels)
        return EVICTED

    async def _record_event(self, candidate: Candidate, ctx: StrategyContext,
                            failure: str | None = None) -> None:
        assert self.kube is not None
        meta = candidate.pod.get("metadata") or {}
        try:
            await self.kube.create(
                resource_path(group_path("events.k8s.io", "v1"), "events", meta.get("namespace")),
                build_event(candidate.pod, ctx.tally.strategy, failure=failure),
            )
        except KubeError as error:  # the eviction stands; a missing event is only logged
            self.say(f"{ctx.tally.strategy}: event for {candidate.key} not recorded: {error}")


async def drive(
    decision: CandidateStream, attempt: Callable[[Candidate], Awaitable[bool]]
) -> None:
    """Run a strategy's decision, answering each candidate with the outcome of ``attempt``."""
    try:
        candidate = next(decision)
        while True:
            candidate = decision.send(await attempt(candidate))
    except StopIteration:
        return


def drive_planned(decision: CandidateStream, attempt: Callable[[Candidate], bool]) -> None:
    """The synchronous twin of :func:`drive`, for plans that need no I/O."""
    try:
        candidate = next(decision)
        while True:
            candidate = decision.send(attempt(candidate))
    except StopIteration:
        return


def planned_attempt(book: EvictionBook, ctx: StrategyContext) -> Callable[[Candidate], bool]:
    """An attempt that only books: every admissible candidate counts as evicted."""

    def attempt(candidate: Candidate) -> bool:
        refusal = book.refusal(candidate, ctx)
        if refusal:
            ctx.tally.skipped[refusal] += 1
            return False
        book.record(candidate)
        accept(candidate, ctx)
        return True

    return attempt
