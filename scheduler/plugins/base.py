"""The shapes every predicate and priority shares.

A predicate's ``prefilter(pod, snapshot)`` runs once per decision and returns either ``None``
(the predicate cannot reject any node for this pod: skipped), a ``Status`` (every node is
rejected, e.g. an unbound immediate claim), or a ``check(node_info) -> Status | None`` closure
that holds the pod-only work and stays tiny per node. A predicate that already knows, from an
index, the only nodes it can pass wraps its check in a :class:`NarrowedCheck` declaring that
set, so the engine can visit those nodes alone; one that knows nodes it rejects for sure (the
domains barred by required anti-affinity) wraps it in an :class:`ExcludingCheck`, so the engine
can leave them out of its walk.

A priority's ``scores(pod, snapshot, nodes)`` returns one 0..100 score per node (in ``nodes``
order; kube-scheduler's MaxNodeScore, k8s.io/kube-scheduler/framework/interface.go, which the
Policy's priorities have used since the scheduling framework replaced them), or a single int
when every node scores the same (the engine then skips the sum, since a constant cannot change
the winner). A priority whose score for a node depends on nothing but
that node's own ``NodeInfo`` and the pod (no other node, no normalisation over the set, no
other object of the snapshot) says so by returning, from ``local_key(pod)``, a string naming
everything it reads of the pod; the engine then keeps its node's score in ``NodeInfo.memo``
until the node changes (the resource priorities: the pod's requests alone decide them).

``Status.unresolvable`` mirrors kube-scheduler's UnschedulableAndUnresolvable: preemption
cannot help such a node. ``Status.reasons`` are kube-scheduler's words, counted in the
FailedScheduling message; ``Status.detail``, when set, is the longer account ``simulate
--explain`` shows instead (which taint, every failing part of a combined predicate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, ClassVar

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

MAX_PRIORITY = 100  # fwk.MaxNodeScore


@dataclass(frozen=True, slots=True)
class Status:
    reasons: tuple[str, ...]
    unresolvable: bool = False
    detail: str = ""

    def explain(self) -> str:
        """What ``simulate --explain`` shows for this rejection."""
        return self.detail or "; ".join(self.reasons)


def unschedulable(*reasons: str) -> Status:
    return Status(tuple(reasons), False)


def unresolvable(*reasons: str) -> Status:
    return Status(tuple(reasons), True)


Check = Callable[[NodeInfo], Status | None]


def unresolvable_for(reasons_of: Callable[[NodeInfo], tuple[str, ...]]) -> Check:
    """A filter check from the reasons a node fails for: None when it has none, else an
    UnschedulableAndUnresolvable Status, one per distinct set of reasons (every node failing
    alike shares it: a decision's diagnosis may hold thousands of nodes)."""
    cache: dict[tuple[str, ...], Status] = {}

    def check(node: NodeInfo) -> Status | None:
        reasons = reasons_of(node)
        if not reasons:
            return None
        status = cache.get(reasons)
        if status is None:
            status = cache[reasons] = unresolvable(*reasons)
        return status

    return check


@dataclass(frozen=True, slots=True)
class NarrowedCheck:
    """A per-node check plus the nodes it can pass: every node outside ``allowed`` is rejected
    by ``check`` for sure (the engine visits ``allowed`` alone and asks ``check`` for the
    others' reasons only when it reports them). ``exact`` also promises that every node in
    ``allowed`` passes, so the engine need not run ``check`` on the nodes it visits. Callable
    like any other check."""

    check: Check
    allowed: Set[str]
    exact: bool = False

    def __call__(self, node: NodeInfo) -> Status | None:
        return self.check(node)


@dataclass(frozen=True, slots=True)
class ExcludingCheck:
    """A per-node check plus nodes it rejects for sure (``blocked``): the engine may leave
    them out of its walk, and asks ``check`` for their reasons only when it reports them, as
    for a :class:`NarrowedCheck`'s outsiders. Callable like any other check."""

    check: Check
    blocked: Set[str]

    def __call__(self, node: NodeInfo) -> Status | None:
        return self.check(node)


def narrowing(check: Check) -> Set[str] | None:
    """The nodes ``check`` can pass when it declares them (a NarrowedCheck), else None."""
    return check.allowed if isinstance(check, NarrowedCheck) else None


def exclusion(check: Check) -> Set[str] | None:
    """The nodes ``check`` rejects for sure when it declares them (an ExcludingCheck)."""
    return check.blocked if isinstance(check, ExcludingCheck) else None


def unwrap(check: Check) -> Check:
    """The bare per-node function of ``check`` (the engine's hot loop calls it directly)."""
    if isinstance(check, NarrowedCheck | ExcludingCheck):
        return check.check
    return check


PrefilterResult = Check | Status | None


@dataclass
class Predicate:
    """Base class: ``name`` is the name the policy gave this entry (user-chosen for configurable
    ones); ``NAME`` the rule's canonical name."""

    NAME: ClassVar[str] = ""
    ALIASES: ClassVar[tuple[str, ...]] = ()
    # cluster events that could make a node rejected by this predicate fit (for the queue)
    EVENTS: ClassVar[tuple[str, ...]] = ()
    name: str = ""
    # the plugin's parsed ``pluginConfig`` arguments (an out-of-tree plugin's; see
    # berthmaster.scheduler.framework.PluginKind)
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.NAME

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        raise NotImplementedError

    def events_for(self, pod: PodView) -> tuple[str, ...]:
        """The cluster events that could make a node this predicate rejected ``pod`` on fit
        (upstream's queueing hints, as far as they read the pod alone): ``EVENTS``."""
        return self.EVENTS

    def fits(self, pod: PodView, snapshot: Snapshot, node: NodeInfo) -> bool:
        check = self.prefilter(pod, snapshot)
        if check is None:
            return True
        if isinstance(check, Status):
            return False
        return check(node) is None


@dataclass
class Priority:
    NAME: ClassVar[str] = ""
    ALIASES: ClassVar[tuple[str, ...]] = ()
    name: str = ""
    weight: int = 1
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.NAME

    def scores(self, pod: PodView, snapshot: Snapshot,
               nodes: Sequence[NodeInfo]) -> list[int] | int:
        raise NotImplementedError

    def local_key(self, pod: PodView) -> str | None:
        """What this priority reads of ``pod``, when a node's score depends only on that and
        the node's own state (see the module docstring); None: not node-local."""
        return None


def normalize(raw: list[int], reverse: bool = False) -> list[int]:
    """Scale raw scores to 0..MAX_PRIORITY by the maximum (upstream's NormalizeReduce)."""
    top = max(raw, default=0)
    if top == 0:
        return [MAX_PRIORITY] * len(raw) if reverse else [0] * len(raw)
    if reverse:
        return [MAX_PRIORITY - MAX_PRIORITY * s // top for s in raw]
    return [MAX_PRIORITY * s // top for s in raw]
