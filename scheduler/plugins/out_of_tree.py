"""Out-of-tree plugins: found by name among installed packages, and contained when they fail.

Discovery: an installed distribution declares, in its entry point group ``berthmaster.plugins``
(:data:`~berthmaster.scheduler.framework.ENTRY_POINT_GROUP`), one entry per plugin, named as a
profile names the plugin, whose object is a
:class:`~berthmaster.scheduler.framework.PluginKind`. :func:`find` looks one name up with
``importlib.metadata`` (the distributions on ``sys.path``), so a plugin is loaded only when a
configuration enables it. In-tree names always win (the configuration loader asks here only
for names it does not know).

Containment: an out-of-tree plugin's predicate and priority are wrapped
(:func:`contain_predicate`, :func:`contain_priority`) so that anything they raise comes out as
a :class:`~berthmaster.scheduler.framework.PluginError` naming the plugin and the extension
point in upstream's words; the scheduling loop turns that into the pod's Error status and a
backoff retry, and goes on with the next pod. The wrappers also time the calls and report them
to an observer (the daemon's ``scheduler_plugin_execution_duration_seconds`` and
``scheduler_plugin_evaluation_total``, pkg/scheduler/metrics/metrics.go): PreFilter and Score
(once per cycle) always; the per-node Filter calls in one cycle of :data:`SAMPLE_EVERY`, as
upstream times plugins in 10% of its cycles (schedule_one.go, pluginMetricsSamplePercent),
since timing every node doubles a cheap filter's cost; an error is always counted. In-tree
plugins are not wrapped, so their hot path keeps its cost.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from berthmaster.scheduler.framework import (
    ENTRY_POINT_GROUP,
    Code,
    PluginError,
    PluginKind,
    code_of,
    score_problems,
)
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import (
    Check,
    ExcludingCheck,
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

# (plugin, extension point, status code name, seconds); and (plugin, extension point) once per
# cycle for the evaluation count
Observer = Callable[[str, str, str, float], None]
EvaluationObserver = Callable[[str, str], None]
SAMPLE_EVERY = 10  # the Filter calls of one cycle in ten are timed (the first one's included)


class PluginLoadError(Exception):
    """An entry point exists but does not give a usable plugin."""


def where_looked() -> str:
    """Where :func:`find` searched, for the error a missing name gets."""
    paths = [p or "." for p in sys.path]
    return (f'entry point group "{ENTRY_POINT_GROUP}" of the packages installed in '
            f"{', '.join(paths)}")


def find(name: str) -> PluginKind | None:
    """The plugin an installed package provides under ``name``, None when none does; raises
    :class:`PluginLoadError` when the entry point cannot be loaded or is not a PluginKind."""
    entries = list(metadata.entry_points(group=ENTRY_POINT_GROUP, name=name))
    if len({e.value for e in entries}) > 1:
        providers = ", ".join(f"{e.dist.name if e.dist else '?'} ({e.value})" for e in entries)
        raise PluginLoadError(f"more than one installed package provides it: {providers}; "
                              "uninstall all but one")
    for entry in entries:
        try:
            loaded = entry.load()
        except Exception as error:  # an import error in a user's package is expected input
            raise PluginLoadError(f"loading {entry.value!r}: {type(error).__name__}: "
                                  f"{error}") from error
        if not isinstance(loaded, PluginKind):
            raise PluginLoadError(f"{entry.value!r} is a {type(loaded).__name__}, not a "
                                  "berthmaster.scheduler.framework.PluginKind (make the entry "
                                  "point name a framework.plugin(...) object)")
        return loaded
    return None


def build(kind: PluginKind, name: str, weight: int, args: dict[str, Any] | None
          ) -> tuple[Predicate | None, Priority | None]:
    """The contained predicate and priority of an out-of-tree plugin enabled as ``name``."""
    extra: dict[str, Any] = {} if args is None else {"args": args}
    predicate = priority = None
    if kind.predicate is not None:
        predicate = contain_predicate(kind.predicate(name=name, **extra))
    if kind.priority is not None:
        priority = contain_priority(kind.priority(name=name, weight=weight or 1, **extra))
    return predicate, priority


@dataclass
class Observers:
    """Where the contained plugins report; set by the daemon, unset (no-op) elsewhere."""

    duration: Observer | None = None
    evaluation: EvaluationObserver | None = None


@dataclass
class ContainedPredicate(Predicate):
    """An out-of-tree predicate behind the containment described in the module docstring."""

    inner: Predicate = field(default_factory=Predicate)
    observers: Observers = field(default_factory=Observers)
    cycles: int = 0

    def __post_init__(self) -> None:
        self.name = self.inner.name

    # the engine reads these by attribute: answer with the wrapped plugin's
    @property
    def NAME(self) -> str:  # type: ignore[override]  # the base's ClassVar
        return self.inner.name

    @property
    def EVENTS(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.inner.EVENTS

    def events_for(self, pod: PodView) -> tuple[str, ...]:
        """The wrapped plugin's queueing hints. When that raises, the engine logs it with the
        plugin's name and names no events, so the pod is retried on any change
        (``Engine.unschedulable_events``): one failing hint must not narrow what the other
        plugins' hints would wake the pod for."""
        return self.inner.events_for(pod)

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        evaluation = self.observers.evaluation
        if evaluation is not None:
            evaluation(self.name, "PreFilter")
        started = time.perf_counter()
        try:
            result = self.inner.prefilter(pod, snapshot)
        except Exception as error:
            self._observe("PreFilter", Code.Error, started)
            raise PluginError(self.name, "PreFilter", error) from error
        if isinstance(result, Status):
            self._observe("PreFilter", code_of(result), started)
            return result
        self._observe("PreFilter", Code.Skip if result is None else Code.Success, started)
        if result is None:
            return None
        if evaluation is not None:
            evaluation(self.name, "Filter")
        timed = self.cycles % SAMPLE_EVERY == 0 and self.observers.duration is not None
        self.cycles += 1
        return _contained_check(self, result, timed)

    def _observe(self, point: str, code: Code, started: float) -> None:
        duration = self.observers.duration
        if duration is not None:
            duration(self.name, point, code.name, time.perf_counter() - started)


def _contained_check(owner: ContainedPredicate, check: Check, timed: bool) -> Check:
    inner = check.check if isinstance(check, NarrowedCheck | ExcludingCheck) else check
    name = owner.name

    def contained(node: NodeInfo) -> Status | None:
        started = time.perf_counter()
        try:
            status = inner(node)
        except Exception as error:
            owner._observe("Filter", Code.Error, started)
            raise PluginError(name, "Filter", error) from error
        owner._observe("Filter", code_of(status), started)
        return status

    def untimed(node: NodeInfo) -> Status | None:
        try:
            return inner(node)
        except Exception as error:
            owner._observe("Filter", Code.Error, time.perf_counter())
            raise PluginError(name, "Filter", error) from error

    if not timed:
        contained = untimed

    if isinstance(check, NarrowedCheck):
        return NarrowedCheck(contained, check.allowed, check.exact)
    if isinstance(check, ExcludingCheck):
        return ExcludingCheck(contained, check.blocked)
    return contained


@dataclass
class ContainedPriority(Priority):
    """An out-of-tree priority behind the containment described in the module docstring; a
    score outside 0..100 is an error, as upstream's RunScorePlugins checks."""

    inner: Priority = field(default_factory=Priority)
    observers: Observers = field(default_factory=Observers)

    def __post_init__(self) -> None:
        self.name, self.weight = self.inner.name, self.inner.weight

    @property
    def NAME(self) -> str:  # type: ignore[override]  # the base's ClassVar
        return self.inner.name

    def scores(self, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
               ) -> list[int] | int:
        evaluation = self.observers.evaluation
        if evaluation is not None:
            evaluation(self.name, "Score")
        started = time.perf_counter()
        try:
            result = self.inner.scores(pod, snapshot, nodes)
        except Exception as error:
            self._observe(Code.Error, started)
            raise PluginError(self.name, "Score", error) from error
        problem = score_problems(self.name, [result] if isinstance(result, int) else result)
        if problem is not None:
            self._observe(Code.Error, started)
            raise PluginError(self.name, "Score", problem)
        self._observe(Code.Success, started)
        return result

    def _observe(self, code: Code, started: float) -> None:
        duration = self.observers.duration
        if duration is not None:
            duration(self.name, "Score", code.name, time.perf_counter() - started)


def contain_predicate(predicate: Predicate) -> ContainedPredicate:
    return ContainedPredicate(inner=predicate)


def contain_priority(priority: Priority) -> ContainedPriority:
    return ContainedPriority(inner=priority)


def observe(predicates: Sequence[Predicate], priorities: Sequence[Priority],
            observers: Observers) -> int:
    """Point every contained plugin of a profile at ``observers``; how many there are."""
    count = 0
    for plugin in (*predicates, *priorities):
        if isinstance(plugin, ContainedPredicate | ContainedPriority):
            plugin.observers = observers
            count += 1
    return count
