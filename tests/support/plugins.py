"""Out-of-tree scheduler plugins for tests, made discoverable the way an installed package is:
a ``*.dist-info`` directory with an ``entry_points.txt`` on ``sys.path``, so
``importlib.metadata`` finds them exactly as it finds a ``pip install``-ed plugin
(docs/plugins.md), with nothing installed into the environment.

``broken`` plugins misbehave on purpose (raise in PreFilter, Filter or Score; score out of
range; fail to import; not a PluginKind) for the containment tests.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from berthmaster.scheduler import framework

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "licensed-nodes"
EXAMPLE_ENTRY_POINTS = {"LicensedNodes": "berthmaster_licensed_nodes:PLUGIN"}
BROKEN_ENTRY_POINTS = {
    "RaisingPreFilter": "tests.support.plugins:RAISING_PREFILTER",
    "RaisingFilter": "tests.support.plugins:RAISING_FILTER",
    "RaisingScore": "tests.support.plugins:RAISING_SCORE",
    "WildScore": "tests.support.plugins:WILD_SCORE",
    "Unimportable": "tests.support.no_such_module:PLUGIN",
    "NotAPlugin": "tests.support.plugins:NOT_A_PLUGIN",
    "RaisingInit": "tests.support.plugins:RAISING_INIT",
    "RaisingHints": "tests.support.plugins:RAISING_HINTS",
    "HoldUntilReleased": "tests.support.plugins:HOLD_UNTIL_RELEASED",
    "RaisingReserve": "tests.support.plugins:RAISING_RESERVE",
    "HangingFilter": "tests.support.plugins:HANGING_FILTER",
}
# HoldUntilReleased holds pods labelled HOLD at Permit until a pod labelled RELEASE gets there
HOLD, RELEASE = "plugins.berthmaster.test/hold", "plugins.berthmaster.test/release"
# the pods the raising plugins fail on carry this label; others pass untouched
TRIGGER = "plugins.berthmaster.test/raise"
# the pods HangingFilter never answers for (a loop that does not end)
HANG_TRIGGER = "plugins.berthmaster.test/hang"
# the pods RaisingHints rejects, and whose queueing hints it then fails to give
HINTS_TRIGGER = "plugins.berthmaster.test/raise-hints"


def write_distribution(root: Path, name: str, entries: Mapping[str, str]) -> None:
    """A minimal installed distribution under ``root``: its metadata and its entry points."""
    info = root / f"{name.replace('-', '_')}-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.0\n")
    lines = [f"[{framework.ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@contextmanager
def installed(root: Path, paths: Sequence[Path] = ()) -> Iterator[None]:
    """The example and the broken plugins discoverable while the block runs."""
    write_distribution(root, "berthmaster-licensed-nodes", EXAMPLE_ENTRY_POINTS)
    write_distribution(root, "berthmaster-test-broken-plugins", BROKEN_ENTRY_POINTS)
    added = [str(root), str(EXAMPLE / "src"), *map(str, paths)]
    sys.path[:0] = added
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for path in added:
            sys.path.remove(path)
        importlib.invalidate_caches()


def _triggered(pod: framework.PodView) -> str | None:
    return pod.labels.get(TRIGGER)


@dataclass
class _RaisingPreFilter(framework.Predicate):
    NAME: ClassVar[str] = "RaisingPreFilter"

    def prefilter(self, pod: framework.PodView, snapshot: framework.Snapshot
                  ) -> framework.PrefilterResult:
        if _triggered(pod):
            raise RuntimeError("prefilter exploded")
        return None


@dataclass
class _RaisingFilter(framework.Predicate):
    NAME: ClassVar[str] = "RaisingFilter"
    EVENTS: ClassVar[tuple[str, ...]] = ("Node/Add",)

    def prefilter(self, pod: framework.PodView, snapshot: framework.Snapshot
                  ) -> framework.PrefilterResult:
        if not _triggered(pod):
            return None

        def check(node: framework.NodeInfo) -> framework.Status | None:
            raise KeyError(f"no table for {node.name}")

        return check


@dataclass
class _HangingFilter(framework.Predicate):
    """Never returns from Filter for the pods labelled HANG_TRIGGER: a busy loop, which only
    the interpreter's signal handling can interrupt."""

    NAME: ClassVar[str] = "HangingFilter"
    EVENTS: ClassVar[tuple[str, ...]] = ("Node/Add",)

    def prefilter(self, pod: framework.PodView, snapshot: framework.Snapshot
                  ) -> framework.PrefilterResult:
        if not pod.labels.get(HANG_TRIGGER):
            return None

        def check(node: framework.NodeInfo) -> framework.Status | None:
            spins = 0
            while node.name:
                spins += 1
            return None

        return check


@dataclass
class _RaisingScore(framework.Priority):
    NAME: ClassVar[str] = "RaisingScore"

    def scores(self, pod: framework.PodView, snapshot: framework.Snapshot,
               nodes: Sequence[framework.NodeInfo]) -> list[int] | int:
        if _triggered(pod):
            raise ZeroDivisionError("division by zero")
        return 0


@dataclass
class _WildScore(framework.Priority):
    NAME: ClassVar[str] = "WildScore"

    def scores(self, pod: framework.PodView, snapshot: framework.Snapshot,
               nodes: Sequence[framework.NodeInfo]) -> list[int] | int:
        return [1000 for _ in nodes]


@dataclass
class _RaisingHints(framework.Predicate):
    """Rejects the pods carrying HINTS_TRIGGER, then raises when asked which cluster events
    could make them schedulable."""

    NAME: ClassVar[str] = "RaisingHints"

    def prefilter(self, pod: framework.PodView, snapshot: framework.Snapshot
                  ) -> framework.PrefilterResult:
        if not pod.labels.get(HINTS_TRIGGER):
            return None
        return lambda node: framework.unschedulable("node(s) are not for this pod")

    def events_for(self, pod: framework.PodView) -> tuple[str, ...]:
        raise LookupError("hint table missing")


@dataclass
class _RaisingInit(framework.Predicate):
    NAME: ClassVar[str] = "RaisingInit"

    def __post_init__(self) -> None:
        raise ValueError("cannot reach the license server")


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("labels") or {})


@dataclass
class _HoldUntilReleased(framework.Lifecycle):
    """A Permit plugin: waits on held pods, and a releasing pod allows every held one
    through the handle's waiting pods (upstream's IterateOverWaitingPods)."""

    NAME: ClassVar[str] = "HoldUntilReleased"

    def permit(self, state: framework.CycleState, pod: dict[str, Any], node: str
               ) -> framework.Status | framework.Wait | None:
        assert self.handle is not None
        if RELEASE in _labels(pod):
            for waiting in self.handle.iterate_over_waiting_pods():
                waiting.allow(self.name)
            return None
        return framework.Wait(600) if HOLD in _labels(pod) else None


@dataclass
class _RaisingReserve(framework.Lifecycle):
    NAME: ClassVar[str] = "RaisingReserve"

    def reserve(self, state: framework.CycleState, pod: dict[str, Any], node: str
                ) -> framework.Status | None:
        if TRIGGER in _labels(pod):
            raise RuntimeError("reservation book is closed")
        return None


HOLD_UNTIL_RELEASED = framework.plugin(lifecycle=_HoldUntilReleased, lifecycle_points=("permit",))
RAISING_RESERVE = framework.plugin(lifecycle=_RaisingReserve, lifecycle_points=("reserve",))
RAISING_INIT = framework.plugin(filter=_RaisingInit)
RAISING_PREFILTER = framework.plugin(filter=_RaisingPreFilter)
RAISING_FILTER = framework.plugin(filter=_RaisingFilter)
HANGING_FILTER = framework.plugin(filter=_HangingFilter)
RAISING_SCORE = framework.plugin(score=_RaisingScore)
RAISING_HINTS = framework.plugin(filter=_RaisingHints)
WILD_SCORE = framework.plugin(score=_WildScore)
NOT_A_PLUGIN: Any = {"name": "NotAPlugin"}
