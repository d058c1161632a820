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
  :meth:`Lifecycle.permit` returns (:class:`Wait`).
- **Queueing hints**: ``Predicate.EVENTS`` (or ``events_for(pod)``) names the cluster events,
  as upstream's ClusterEvent ``"Resource/Action"`` (``"Node/Add"``,
  ``"Node/UpdateNodeLabel"``, ``"Pod/Delete"``...; the names
  :mod:`berthmaster.scheduler.daemon.hints` maps watch events to), that could make a node the
  plugin rejected fit. A pod it rejected is retried on those events only. None declared: the
  queue's defaults (any node change) apply.
- **Extra watched objects**: ``PluginKind.watches`` names further kinds (a CRD's
  :class:`Watched`); the daemon's cache lists and watches them into the snapshot
  (``snapshot.object(kind, namespace, name)``, ``snapshot.objects_of(kind)``) and each change is
  a cluster event ``"<Kind>/Add"``, ``"/Update"``, ``"/Delete"`` for the queueing hints.
- **QueueSort, PostFilter, Reserve / Unreserve, Permit, PreBind, Bind, PostBind**: a
  :class:`Lifecycle` class, instantiated once per profile by the daemon with a :class:`Handle`
  (upstream's framework.Handle: the snapshot, the waiting pods, the API client). Reserve and
  Permit run in the scheduling cycle, in profile order; Permit may answer :class:`Wait`, and the
  pod, assumed on its node, then waits in the binding cycle (a task of its own: the scheduling
  loop goes on) until every waiting plugin allows it (:meth:`WaitingPod.allow`), one rejects it
  or its timeout passes (runtime/framework.go RunPermitPlugins and WaitOnPermit,
  runtime/waiting_pods_map.go). PreBind, Bind and PostBind run in the binding cycle. Any failure
  after Reserve runs every Unreserve in reverse order (schedule_one.go handleBindingCycleError).
  VolumeBinding's Reserve/PreBind and DefaultBinder are in-tree Lifecycles.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

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
    "ENTRY_POINT_GROUP",
    "MAX_NODE_SCORE",
    "MAX_PERMIT_TIMEOUT_SECONDS",
    "MIN_NODE_SCORE",
    "SKIP",
    "ArgErrors",
    "ArgsParser",
    "Check",
    "Code",
    "CycleState",
    "ExcludingCheck",
    "Handle",
    "Lifecycle",
    "NarrowedCheck",
    "NodeInfo",
    "PluginError",
    "PluginKind",
    "PodView",
    "Predicate",
    "PrefilterResult",
    "Priority",
    "Snapshot",
    "Status",
    "Wait",
    "WaitingPod",
    "Watched",
    "code_of",
    "normalize",
    "plugin",
    "unresolvable",
    "unschedulable",
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


JSON = dict[str, Any]
MAX_PERMIT_TIMEOUT_SECONDS = 15 * 60.0  # runtime/framework.go maxTimeout


@dataclass(frozen=True)
class Watched:
    """A kind a plugin needs watched (a CRD): its API group and version, its ``kind`` and
    ``plural``, whether it is namespaced. Its changes are the cluster events
    ``"<kind>/Add"``, ``"<kind>/Update"`` and ``"<kind>/Delete"``."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True


@dataclass(frozen=True)
class Wait:
    """Permit's Wait status: hold the pod, assumed on its node, for up to ``timeout`` seconds
    (at most :data:`MAX_PERMIT_TIMEOUT_SECONDS`) until allowed or rejected."""

    timeout: float
    message: str = ""


class CycleState(dict[str, Any]):
    """One pod's state from Reserve to PostBind (upstream's CycleState, for the binding
    cycle): plugins keep what they computed under their own name."""


SKIP = Code.Skip  # what Bind returns for a pod it leaves to the next bind plugin


class WaitingPod(Protocol):
    """A pod held at Permit (framework.WaitingPod)."""

    @property
    def pod(self) -> JSON: ...

    def pending_plugins(self) -> list[str]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


class Handle(Protocol):
    """What the daemon gives a :class:`Lifecycle` (framework.Handle): the snapshot the
    scheduling cycle reads, the pods waiting at Permit, and a way to send a group's parked pods
    back to the active queue (upstream's PodsToActivate)."""

    @property
    def snapshot(self) -> Snapshot: ...

    def iterate_over_waiting_pods(self) -> Iterator[WaitingPod]: ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def reject_waiting_pod(self, uid: str) -> bool: ...

    def activate(self, pods: Sequence[JSON]) -> None: ...

    def predicate(self, name: str) -> Predicate | None:
        """The profile's filter plugin of that name: a plugin's Lifecycle and Predicate share
        state through it, as upstream's one plugin object does."""


@dataclass
class Lifecycle:
    """A plugin's QueueSort, PostFilter, Reserve/Unreserve, Permit, PreBind, Bind and PostBind
    (the points its :class:`PluginKind` declares; the others are never called). Built once per
    profile with the daemon's :class:`Handle`; ``args`` as the plugin's other classes get them.

    Status conventions as for filters: ``None`` is Success, a :class:`Status` Unschedulable,
    raising is Error (worded ``running <Point> plugin "<name>": <error>``)."""

    NAME: ClassVar[str] = ""
    name: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    handle: Handle | None = None

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.NAME

    def sort_key(self, pod: JSON, priority: int, first_seen: float) -> tuple[Any, ...]:
        """QueueSort, as a key: the queue pops the smallest first. ``first_seen`` is the wall
        time the pod first entered the queue (upstream's InitialAttemptTimestamp)."""
        return (-priority, first_seen, "")

    def post_filter(self, pod: JSON) -> str | None:
        """PostFilter, after the earlier PostFilter (preemption) found nothing: a message for the
        FailedScheduling Event, or None."""
        return None

    def reserve(self, state: CycleState, pod: JSON, node: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: JSON, node: str) -> None:
        """Undo Reserve; must be idempotent (it also runs when a later Reserve failed)."""

    def permit(self, state: CycleState, pod: JSON, node: str) -> Status | Wait | None:
        return None

    async def pre_bind(self, state: CycleState, pod: JSON, node: str) -> Status | None:
        return None

    async def bind(self, state: CycleState, pod: JSON, node: str) -> Code | Status | None:
        """Bind the pod (None), leave it to the next bind plugin (:data:`SKIP`) or fail."""
        return SKIP

    def post_bind(self, state: CycleState, pod: JSON, node: str) -> None:
        """Informational, after a successful bind."""


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
    lifecycle: type[Lifecycle] | None = None
    watches: tuple[Watched, ...] = ()


LIFECYCLE_POINTS = ("queueSort", "postFilter", "reserve", "permit", "preBind", "bind",
                    "postBind")


def plugin(*, filter: type[Predicate] | None = None, score: type[Priority] | None = None,
           args: ArgsParser | None = None, lifecycle: type[Lifecycle] | None = None,
           lifecycle_points: Sequence[str] = (), watches: Sequence[Watched] = ()
           ) -> PluginKind:
    """A :class:`PluginKind` whose points follow from its classes: a filter implements
    preFilter and filter, a score preScore and score, a lifecycle the ``lifecycle_points`` it
    names (of :data:`LIFECYCLE_POINTS`; ``reserve`` includes Unreserve)."""
    if filter is None and score is None and lifecycle is None:
        raise ValueError("a plugin needs a filter class, a score class, a lifecycle class or "
                         "some of them")
    unknown = sorted(set(lifecycle_points) - set(LIFECYCLE_POINTS))
    if unknown or (lifecycle is None) != (not lifecycle_points):
        raise ValueError(f"lifecycle_points must name some of {', '.join(LIFECYCLE_POINTS)} "
                         f"when, and only when, a lifecycle class is given (got {unknown})")
    points: set[str] = set(lifecycle_points)
    if filter is not None:
        points.update(("preFilter", "filter"))
    if score is not None:
        points.update(("preScore", "score"))
    return PluginKind(frozenset(points), filter, score, args, lifecycle, tuple(watches))


class PluginError(Exception):
    """A plugin raised: upstream's Error status, worded as runtime/framework.go words it
    (``running "X" filter plugin: <err>``, ``running PreFilter plugin "X": <err>``...)."""

    _WORDING: Mapping[str, str] = {
        "PreFilter": 'running PreFilter plugin "{name}": {error}',
        "Filter": 'running "{name}" filter plugin: {error}',
        "PreScore": 'running PreScore plugin "{name}": {error}',
        "Score": 'plugin "{name}" failed with: {error}',
        "Bind": 'running Bind plugin "{name}": {error}',
        "Reserve": 'running Reserve plugin "{name}": {error}',
        "PreBind": 'running PreBind plugin "{name}": {error}',
        "Permit": 'running Permit plugin "{name}": {error}',
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
