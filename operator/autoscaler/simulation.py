"""What-if placement for the autoscaler: add template nodes, move pods, and roll it all back.

Design: the placement engine decides where a pod fits (any object with the engine's
``fits``/``feasible_nodes``/``why_not``, injected so the decisions stay pure and testable; in
the operator it is ``berthmaster.scheduler.engine.Engine``); this module keeps a journal of
every change it makes to the engine's :class:`Snapshot` (``upsert_node`` undone by
``remove_node``, ``assume`` undone by ``forget``) so a trial such as "three more nodes of this
MachineSet" or "empty this node" can be rolled back to a checkpoint without copying the
snapshot. Pods are addressed by the dicts the snapshot was built from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from berthmaster.scheduler.snapshot import Snapshot

JSON = dict[str, Any]


class Placement(Protocol):
    """The placement engine's questions the autoscaler asks."""

    def fits(self, pod: JSON, node_name: str, snapshot: Snapshot) -> bool: ...

    def feasible_nodes(self, pod: JSON, snapshot: Snapshot,
                       candidates: Iterable[str] | None = None) -> list[str]: ...

    def why_not(self, pod: JSON, node_name: str, snapshot: Snapshot) -> list[str]: ...


class Simulation:
    def __init__(self, snapshot: Snapshot, placement: Placement):
        self.snapshot = snapshot
        self.placement = placement
        self._journal: list[tuple[str, Any]] = []

    @classmethod
    def build(cls, placement: Placement, nodes: Iterable[Mapping[str, Any]],
              pods: Iterable[Mapping[str, Any]], **objects: Iterable[Mapping[str, Any]]
              ) -> Simulation:
        return cls(Snapshot.build(nodes=[dict(n) for n in nodes], pods=[dict(p) for p in pods],
                                  **{k: [dict(o) for o in v] for k, v in objects.items()}),
                   placement)

    # ------------------------------------------------------------------ questions
    def fits(self, pod: JSON, node_name: str) -> bool:
        return self.placement.fits(pod, node_name, self.snapshot)

    def why_not(self, pod: JSON, node_name: str) -> list[str]:
        return self.placement.why_not(pod, node_name, self.snapshot)

    def node_names(self) -> list[str]:
        return list(self.snapshot.node_names)

    def find_node(self, pod: JSON, candidates: Iterable[str]) -> str | None:
        """The first of ``candidates`` where ``pod`` fits (the pod-only work is done once)."""
        found = self.placement.feasible_nodes(pod, self.snapshot, list(candidates))
        return found[0] if found else None

    # ------------------------------------------------------------------ changes
    def add_node(self, node: JSON) -> None:
        name = node["metadata"]["name"]
        if self.snapshot.node(name) is not None:
            raise ValueError(f"simulation already has a node named {name}")
        self.snapshot.upsert_node(node)
        self._journal.append(("node", name))

    def place(self, pod: JSON, node_name: str) -> None:
        self.snapshot.assume(pod, node_name)
        self._journal.append(("pod", (pod, node_name)))

    def checkpoint(self) -> int:
        return len(self._journal)

    def rollback(self, mark: int) -> None:
        while len(self._journal) > mark:
            kind, item = self._journal.pop()
            if kind == "node":
                self.snapshot.remove_node(item)
                continue
            pod, _ = item
            earlier = [node for k, (p, node) in _pods(self._journal) if p is pod]
            if earlier:
                self.snapshot.assume(pod, earlier[-1])  # back to where it was placed before
            else:
                self.snapshot.forget(pod)  # back to the version from before any placement


def _pods(journal: list[tuple[str, Any]]) -> list[tuple[str, tuple[JSON, str]]]:
    return [(kind, item) for kind, item in journal if kind == "pod"]
