"""The scheduling queue: which pending pod to try next, and when to try a rejected one again.

Design (kube-scheduler's PriorityQueue, in one asyncio thread so no locks are needed):

- **active**: a heap ordered by priority (highest first), then by the time the pod entered the
  queue (oldest first). :meth:`SchedulingQueue.pop` takes from here.
- **backoff**: pods that failed recently wait ``initial_backoff * 2**(attempts-1)`` seconds,
  capped at ``max_backoff`` (1 s doubling to 10 s), then move to active.
- **unschedulable**: pods the engine rejected wait for a cluster event that could help them
  (see :mod:`.hints`); such an event moves them to backoff (or straight to active when their
  backoff is already over). Pods parked longer than ``unschedulable_timeout`` (5 minutes, as
  upstream) are flushed anyway.
- **gated**: pods with ``spec.schedulingGates`` are held until the gates are removed.
- **in flight**: a popped pod is neither queued nor forgotten until :meth:`done` or a requeue;
  watch updates received meanwhile are kept, so a pod is never scheduled twice concurrently.

A cluster event that arrives while a pod is being scheduled could be the very one that helps
it; as upstream (in-flight events) such a pod goes to backoff instead of parking. Events scan
only the parked pods, so a flood of bindings costs nothing per active pod; while any pod is in
flight they are also logged, and a pod that comes back unschedulable asks the events logged
since it was popped (most attempts succeed, so most never ask).
Time comes from an injected clock, so the unit tests run on a fake one.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.keys import key_of
from berthmaster.scheduler.daemon.hints import FORCE_ACTIVATE, ClusterEvent, could_help

JSON = dict[str, Any]

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
INFLIGHT = "inflight"


def is_gated(pod: JSON) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


@dataclass
class QueuedPod:
    """A pending pod and its queueing history."""

    pod: JSON
    key: str
    priority: int
    timestamp: float  # when it (re-)entered the queue; the tie-breaker after priority
    first_seen: float  # when it first entered the queue; the SLI latency starts here
    attempts: int = 0
    unschedulable_since: float | None = None
    backoff_expiry: float = 0.0
    cycle: int = 0  # the scheduling cycle that popped it last
    deleted: bool = False  # deleted from the API while in flight
    events_from: int = 0  # the in-flight event log's position when it was popped
    hint_events: frozenset[str] | None = None  # what could help it, per the rejecting predicates
    rejected_by: frozenset[str] = frozenset()  # the predicates that made it unschedulable
    where: str = ""
    _seq: int = field(default=0, repr=False)


class SchedulingQueue:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        unschedulable_timeout: float = 300.0,
        helps: Callable[[JSON, ClusterEvent, frozenset[str] | None], bool] = could_help,
        sort_key: Callable[[JSON, int, float], tuple[Any, ...]] | None = None,
    ):
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.unschedulable_timeout = unschedulable_timeout
        self.helps = helps
        # a QueueSort plugin's key (pod, priority, wall time first queued), None: PrioritySort
        self.sort_key = sort_key
        self._pods: dict[str, QueuedPod] = {}  # every pod the queue knows, wherever it is
        self._parked: dict[str, QueuedPod] = {}  # the unschedulable ones (events scan only these)
        self._in_flight: dict[str, QueuedPod] = {}
        # events since the oldest in-flight pod was popped; _log_base is the first one's index
        self._log: list[ClusterEvent] = []
        self._log_base = 0
        self._trim_at = _LOG_TRIM_AT
        self._active: list[tuple[tuple[Any, ...], int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._counter = itertools.count()
        self._counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
        self._cycle = 0
        self._wakeup = asyncio.Event()
        self.on_change: Callable[[dict[str, int]], None] | None = None
        self.on_incoming: Callable[[str, str], None] | None = None  # (queue, event)
        # (predicates, +1/-1) as a pod enters or leaves the unschedulable sub-queue
        self.on_unschedulable: Callable[[frozenset[str], int], None] | None = None

    # ---- bookkeeping -------------------------------------------------------------------------
    def _leave(self, info: QueuedPod) -> None:
        if info.where in self._counts:
            self._counts[info.where] -= 1
        if info.where == UNSCHEDULABLE:
            self._parked.pop(info.key, None)
            if self.on_unschedulable is not None and info.rejected_by:
                self.on_unschedulable(info.rejected_by, -1)
        elif info.where == INFLIGHT:
            self._in_flight.pop(info.key, None)
            if not self._in_flight:
                self._log_base += len(self._log)
                self._log.clear()

    def _place(self, info: QueuedPod, where: str, event: str) -> None:
        self._leave(info)
        info.where = where
        if where == UNSCHEDULABLE:
            self._parked[info.key] = info
            if self.on_unschedulable is not None and info.rejected_by:
                self.on_unschedulable(info.rejected_by, 1)
        info._seq = next(self._counter)
        if where == ACTIVE:
            heapq.heappush(self._active, (self._order(info), info._seq, info.key))
            self._wakeup.set()
        elif where == BACKOFF:
            heapq.heappush(self._backoff, (info.backoff_expiry, info._seq, info.key))
            self._wakeup.set()
        if where in self._counts:
            self._counts[where] += 1
        if self.on_incoming is not None and where in self._counts:
            self.on_incoming(where, event)
        if self.on_change is not None:
            self.on_change(dict(self._counts))

    def _order(self, info: QueuedPod) -> tuple[Any, ...]:
        """The active heap's key: PrioritySort's (priority, then time queued) or the QueueSort
        plugin's."""
        if self.sort_key is None:
            return (-info.priority, info.timestamp)
        first_seen = time.time() - (self.clock() - info.first_seen)
        return self.sort_key(info.pod, info.priority, first_seen)

    def activate(self, pods: Sequence[JSON]) -> int:
        """Move these pods, when parked or backing off, to active at once (upstream's
        PodsToActivate / Activate); how many moved."""
        moved = 0
        for pod in pods:
            info = self._pods.get(key_of(pod))
            if info is not None and info.where in (UNSCHEDULABLE, BACKOFF):
                self._place(info, ACTIVE, FORCE_ACTIVATE)
                moved += 1
        return moved

    def _backoff_duration(self, attempts: int) -> float:
        duration: float = self.initial_backoff * float(2 ** max(0, attempts - 1))
        return min(duration, self.max_backoff)

    def _requeue_target(self, info: QueuedPod, now: float) -> str:
        return BACKOFF if info.backoff_expiry > now else ACTIVE

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def __len__(self) -> int:
        return sum(self._counts.values())

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def get(self, key: str) -> QueuedPod | None:
        return self._pods.get(key)

    # ---- watch-driven changes ----------------------------------------------------------------
    def add(self, pod: JSON, priority: int) -> None:
        """A pending pod for this scheduler was added or updated in the API."""
        key = key_of(pod)
        now = self.clock()
        info = self._pods.get(key)
        if info is None:
            info = QueuedPod(pod=pod, key=key, priority=priority, timestamp=now, first_seen=now)
            self._pods[key] = info
            self._place(info, GATED if is_gated(pod) else ACTIVE, "PodAdd")
            return
        old = info.pod
        info.pod = pod
        info.priority = priority
        if info.where == INFLIGHT:
            return  # the latest object is read back when the attempt finishes
        if info.where == GATED and not is_gated(pod):
            info.timestamp = now
            self._place(info, ACTIVE, "PodUpdate")
        elif info.where == UNSCHEDULABLE and _spec_changed(old, pod):
            # The pod itself changed (tolerations, affinity, requests...): worth another try.
            self._place(info, self._requeue_target(info, now), "PodUpdate")
        elif info.where == ACTIVE:
            self._place(info, ACTIVE, "PodUpdate")  # the priority may have changed

    def delete(self, key: str) -> None:
        """The pod was deleted, bound by someone else, or is no longer ours."""
        info = self._pods.get(key)
        if info is None:
            return
        if info.where == INFLIGHT:
            info.deleted = True
            return
        self._forget(info)

    def _forget(self, info: QueuedPod) -> None:
        self._leave(info)
        info.where = "gone"
        self._pods.pop(info.key, None)
        if self.on_change is not None:
            self.on_change(dict(self._counts))

    def move_for_event(self, event: ClusterEvent) -> int:
        """Move the parked pods ``event`` could help; returns how many moved."""
        now = self.clock()
        moved = 0
        for info in list(self._parked.values()):
            if self.helps(info.pod, event, info.hint_events):
                self._place(info, self._requeue_target(info, now), event.kind)
                moved += 1
        if self._in_flight:
            self._log.append(event)
            if len(self._log) > self._trim_at:
                self._trim_log()
        return moved

    def _trim_log(self) -> None:
        """Drop the logged events every in-flight pod was popped after."""
        oldest = min(info.events_from for info in self._in_flight.values())
        cut = oldest - self._log_base
        if cut > 0:
            del self._log[:cut]
            self._log_base = oldest
        # a long attempt may hold the log: try again only once it has doubled (amortised)
        self._trim_at = max(_LOG_TRIM_AT, 2 * len(self._log))

    def _helped_in_flight(self, info: QueuedPod, hint_events: frozenset[str] | None) -> bool:
        """Whether an event logged while ``info`` was in flight could help it."""
        since = max(0, info.events_from - self._log_base)
        return any(self.helps(info.pod, event, hint_events) for event in self._log[since:])

    # ---- the scheduling cycle ----------------------------------------------------------------
    def flush(self) -> None:
        """Backoff pods whose time is up go to active; long-parked pods are retried anyway."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, key = heapq.heappop(self._backoff)
            info = self._pods.get(key)
            if info is not None and info.where == BACKOFF and info._seq == seq:
                self._place(info, ACTIVE, "BackoffComplete")
        for info in list(self._parked.values()):
            if (info.unschedulable_since is not None
                    and now - info.unschedulable_since >= self.unschedulable_timeout):
                self._place(info, self._requeue_target(info, now), "UnschedulableTimeout")

    def pop_nowait(self) -> QueuedPod | None:
        """The next pod to schedule (now marked in flight), or None when none is ready."""
        self.flush()
        while self._active:
            _, seq, key = heapq.heappop(self._active)
            info = self._pods.get(key)
            if info is None or info.where != ACTIVE or info._seq != seq:
                continue  # a stale heap entry: the pod moved or left since
            self._counts[ACTIVE] -= 1
            info.where = INFLIGHT
            self._in_flight[key] = info
            info.events_from = self._log_base + len(self._log)
            info.attempts += 1
            self._cycle += 1
            info.cycle = self._cycle
            if self.on_change is not None:
                self.on_change(dict(self._counts))
            return info
        return None

    def next_wakeup(self) -> float | None:
        """Seconds until a backoff or an unschedulable timeout could make a pod ready."""
        now = self.clock()
        deadlines = [entry[0] for entry in self._backoff[:1]]
        deadlines += [info.unschedulable_since + self.unschedulable_timeout
                      for info in self._parked.values() if info.unschedulable_since is not None]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - now)

    async def pop(self) -> QueuedPod:
        """Wait for the next pod to schedule."""
        while True:
            info = self.pop_nowait()
            if info is not None:
                return info
            self._wakeup.clear()
            wait = self.next_wakeup()
            timeout = 1.0 if wait is None else min(max(wait, 0.001), 1.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=timeout)

    def done(self, key: str) -> None:
        """The pod's attempt succeeded (it is bound, or needs nothing more): forget it."""
        info = self._pods.get(key)
        if info is not None and info.where == INFLIGHT:
            self._forget(info)

    def requeue(self, info: QueuedPod, unschedulable: bool,
                hint_events: frozenset[str] | None = None,
                rejected_by: frozenset[str] = frozenset()) -> None:
        """The attempt failed: park the pod (``unschedulable``, waiting for one of
        ``hint_events`` when given; ``rejected_by`` names the predicates that rejected it) or
        back it off (an error)."""
        if self._pods.get(info.key) is not info or info.where != INFLIGHT:
            return
        if info.deleted:
            self._forget(info)
            return
        now = self.clock()
        info.hint_events = hint_events
        info.rejected_by = rejected_by if unschedulable else frozenset()
        info.timestamp = now
        info.backoff_expiry = now + self._backoff_duration(info.attempts)
        if is_gated(info.pod):
            self._place(info, GATED, "ScheduleAttemptFailure")
        elif unschedulable and not self._helped_in_flight(info, hint_events):
            info.unschedulable_since = now
            self._place(info, UNSCHEDULABLE, "ScheduleAttemptFailure")
        else:
            # An error, or an event arrived during the attempt that may have helped it.
            info.unschedulable_since = None
            self._place(info, BACKOFF, "ScheduleAttemptFailure")


_LOG_TRIM_AT = 1024  # logged in-flight events before the log drops what no pod needs

_IGNORED_META = ("resourceVersion", "generation", "managedFields", "annotations")


def _spec_changed(old: JSON, new: JSON) -> bool:
    """Whether anything but status and bookkeeping metadata changed (upstream's isPodUpdated)."""
    def strip(pod: JSON) -> tuple[Any, Any, Any]:
        meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _IGNORED_META}
        return meta, pod.get("spec"), None
    return strip(old) != strip(new)
