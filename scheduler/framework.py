"""The public scheduler plugin API: what an out-of-tree plugin imports, and all it may import.

berthmaster's in-tree plugins and out-of-tree ones share one mechanism. A plugin is declared by
a :class:`PluginKind`: the extension points it implements, a :class:`Predicate` class carrying
its PreFilter and Filter, a :class:`Priority` class carrying its PreScore, Score and
NormalizeScore, and, when it takes ``pluginConfig`` arguments, a parser that defaults and
validates them. An installed package exposes a ``PluginKind`` under the entry point group
``berthmaster.plugins`` (:data:`ENTRY_POINT_GROUP`) with the plugin's name; a
KubeSchedulerConfiguration profile then enables, disables, orders and weighs it exactly as an
in-tree plugin (docs/plugins.md).

How upstream's framework (k8s.io/kube-scheduler/framework/interface.go, v0.35.4) maps here:

- **PreFilter + Filter**: ``Predicate.prefilter(pod, snapshot)`` runs once per cycle and
  returns ``None`` (upstream's Skip: this plugin cannot reject any node for the pod), a
  :class:`Status` (every node rejected at once), or a per-node ``check(node_info)`` that
  returns ``None`` (Success) or a Status. The closure the check captures is the plugin's
  per-cycle state: it plays the part of upstream's ``CycleState`` (written in PreFilter, read
  in Filter) and is dropped with the cycle.
- **PreScore + Score + NormalizeScore**: ``Priority.scores(pod, snapshot, nodes)`` returns one
  score per feasible node, 0..:data:`MAX_NODE_SCORE` after normalising (:func:`normalize` is
  upstream's NormalizeReduce). The engine multiplies by the profile's weight and sums.
- **Status codes**: :class:`Code` carries upstream's names and numbers. Success is ``None``;
  Unschedulable is :func:`unschedulable`; UnschedulableAndUnresolvable (preemption cannot
  help) is :func:`unresolvable`; Skip is a ``None`` prefilter; Error is an exception: the
  engine's caller turns it into the pod's Error status (``running "X" filter plugin: <err>``,
  runtime/framework.go) and retries the pod with backoff. Wait belongs to Permit, which
  berthmaster does not run (see docs/plugins.md, "Permit").
- **Queueing hints**: ``Predicate.EVENTS`` (or ``events_for(pod)``) names the cluster events,
  as upstream's ClusterEvent ``"Resource/Action"`` (``"Node/Add"``,
  ``"Node/UpdateNodeLabel"``, ``"Pod/Delete"``...; the names
  :mod:`berthmaster.scheduler.daemon.hints` maps watch events to), that could make a node the
  plugin rejected fit. A pod it rejected is retried on those events only. None declared: the
  queue's defaults (any node change) apply.
- **Extra watched objects**: not offered. The scheduler's cache watches a fixed set of kinds
  (Nodes, Pods, volumes, PriorityClasses, PDBs...: :class:`Snapshot`); a plugin reads those.
- **Reserve / PreBind / Permit / Bind**: not open to out-of-tree plugins; VolumeBinding's are
  built into the daemon.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import (
    MAX_PRIORITY,
    Check,
    ExcludingCheck,
    NarrowedCheck,
    Predicate,
    PrefilterResult,
    Priority,
    Status,
    normalize,
    unresolvable,
    unschedulable,
)
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

__all__ = [
    "ENTRY_POINT_GROUP", "MAX_NODE_SCORE", "MIN_NODE_SCORE", "ArgErrors", "ArgsParser",
    "Check", "Code", "ExcludingCheck", "NarrowedCheck", "NodeInfo", "PluginError",
    "PluginKind", "PodView", "Predicate", "PrefilterResult", "Priority", "Snapshot", "Status",
    "code_of", "normalize", "plugin", "unresolvable", "unschedulable",
]

ENTRY_POINT_GROUP = "berthmaster.plugins"
MAX_NODE_SCORE = MAX_PRIORITY  # framework.MaxNodeScore
MIN_NODE_SCORE = 0  # framework.MinNodeScore


class Code(enum.IntEnum):
    """framework.Code, same names and numbers."""

    Success = 0
    Error = 1
    Unschedulable = 2
    UnschedulableAndUnresolvable = 3
    Wait = 4
    Skip = 5
    Pending = 6


def code_of(status: Status | None) -> Code:
    """The upstream code of a Filter result (``None`` is Success)."""
    if status is None:
        return Code.Success
    return Code.UnschedulableAndUnresolvable if status.unresolvable else Code.Unschedulable


class ArgErrors:
    """Problems with a plugin's ``pluginConfig`` arguments, each naming its field relative to
    ``args`` (``"licenseLabel"``, ``"weights[2]"``); the configuration loader prefixes the
    profile's path (``profiles[0].pluginConfig[1].args.licenseLabel``) and words them as
    upstream's field errors. A parser reports every problem rather than stopping at the first."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, Any, str]] = []

    def invalid(self, field_path: str, value: Any, detail: str) -> None:
        self.items.append(("invalid", field_path, value, detail))

    def required(self, field_path: str, detail: str = "") -> None:
        self.items.append(("required", field_path, None, detail))

    def unknown(self, field_path: str, known: Sequence[str]) -> None:
        """A field the arguments do not have (strict decoding, as upstream's)."""
        self.items.append(("unknown", field_path, tuple(known), ""))

    def __bool__(self) -> bool:
        return bool(self.items)


# (the args object as written, with apiVersion and kind removed; the collector) -> the
# defaulted arguments the plugin's classes receive as ``args``
ArgsParser = Callable[[Mapping[str, Any], ArgErrors], dict[str, Any]]


@dataclass(frozen=True)
class PluginKind:
    """One plugin: the extension points it implements (as a profile's ``plugins`` names them:
    ``preFilter``, ``filter``, ``preScore``, ``score``...) and the classes that carry its
    filter and its score. ``args``: the parser of its ``pluginConfig`` arguments, for a
    plugin that takes them (an out-of-tree plugin's classes then get ``args=`` the parsed
    dict); in-tree plugins' arguments are parsed by the configuration loader itself."""

    points: frozenset[str]
    predicate: type[Predicate] | None = None
    priority: type[Priority] | None = None
    args: ArgsParser | None = field(default=None, compare=False)


def plugin(*, filter: type[Predicate] | None = None, score: type[Priority] | None = None,
           args: ArgsParser | None = None) -> PluginKind:
    """A :class:`PluginKind` whose points follow from its classes: a filter implements
    preFilter and filter, a score preScore and score."""
    if filter is None and score is None:
        raise ValueError("a plugin needs a filter class, a score class or both")
    points: set[str] = set()
    if filter is not None:
        points.update(("preFilter", "filter"))
    if score is not None:
        points.update(("preScore", "score"))
    return PluginKind(frozenset(points), filter, score, args)


class PluginError(Exception):
    """A plugin raised: upstream's Error status, worded as runtime/framework.go words it
    (``running "X" filter plugin: <err>``, ``running PreFilter plugin "X": <err>``...)."""

    _WORDING: Mapping[str, str] = {
        "PreFilter": 'running PreFilter plugin "{name}": {error}',
        "Filter": 'running "{name}" filter plugin: {error}',
        "PreScore": 'running PreScore plugin "{name}": {error}',
        "Score": 'plugin "{name}" failed with: {error}',
    }

    def __init__(self, plugin_name: str, extension_point: str, error: BaseException | str):
        self.plugin = plugin_name
        self.extension_point = extension_point
        self.error = error
        wording = self._WORDING.get(extension_point, 'running {point} plugin "{name}": {error}')
        super().__init__(wording.format(name=plugin_name, point=extension_point,
                                        error=error))


def score_problems(name: str, scores: Sequence[int]) -> str | None:
    """runtime/framework.go, RunScorePlugins: the error when a normalised score is out of
    range, else None."""
    for score in scores:
        if not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
            return (f'plugin "{name}" returns an invalid score {score}, it should in the range '
                    f"of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
    return None
