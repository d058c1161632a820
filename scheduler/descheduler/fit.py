"""``nodeFit``: would the placement engine put this pod on that node? One truth, shared.

Design: the descheduler never re-implements placement. For a pass it builds the engine's
:class:`~berthmaster.scheduler.snapshot.Snapshot` once from the same LISTed objects — the volume
objects among them (``berthmaster.scheduler.volume_objects``), so the engine runs the scheduler's
whole default profile, VolumeBinding included: a pod whose claim is bound to a volume with node
affinity (a local PV) fits only the nodes that volume admits, and a pod pinned so to its own
node fits no other (a berthmaster addition to upstream's nodeFit, whose
``pkg/descheduler/node/node.go`` NodeFit checks no volumes: docs/descheduler.md);
:class:`EngineFit` answers ``fit(pod, node_name)`` and ``fit.any_node(pod, names)`` with the
engine's predicates, with the pod itself taken out of the snapshot while asking (where it runs
now must not count against it: its own anti-affinity, spread or resources) and its very view
put back afterwards. ``any_node`` runs the engine's pod-only work once and stops at the first
node that takes the pod (upstream's PodFitsAnyOtherNode also stops at the first fit), so a pass
over thousands of nodes pays for a full filter only for pods that fit almost nowhere. The
strategies see only these two callables, so their decisions stay pure and their unit tests can
hand them any predicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from berthmaster.scheduler.descheduler.context import Pod
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.volume_objects import NO_VOLUMES, VolumeObjects


class EngineFit:
    """The placement engine's filter over one snapshot, for the descheduler's questions."""

    def __init__(
        self,
        nodes: Iterable[dict[str, Any]],
        pods: Iterable[dict[str, Any]],
        namespaces: Iterable[dict[str, Any]] = (),
        pdbs: Iterable[dict[str, Any]] = (),
        priority_classes: Iterable[dict[str, Any]] = (),
        volumes: VolumeObjects = NO_VOLUMES,
    ):
        from berthmaster.scheduler.config import default_profile
        from berthmaster.scheduler.engine import Engine
        from berthmaster.scheduler.snapshot import Snapshot

        self.snapshot = Snapshot.build(nodes=nodes, pods=pods, namespaces=namespaces, pdbs=pdbs,
                                       priority_classes=priority_classes,
                                       **volumes.snapshot_args())
        self.engine = Engine(default_profile())
        self._answers: dict[tuple[str, str], bool] = {}

    @contextmanager
    def _without(self, pod: Pod) -> Iterator[None]:
        from berthmaster.scheduler.snapshot import pod_key

        key = pod_key(pod)
        present = self.snapshot.get_pod(key)
        if present is not None:
            self.snapshot.remove_pod(key)
        try:
            yield
        finally:
            if present is not None:
                # put back the very view taken out: no rebuild, whatever the view cache holds
                self.snapshot.upsert_view(present)

    def view_of(self, pod: Pod) -> PodView | None:
        """The snapshot's view of a listed pod (shared, so a pass builds each view once)."""
        from berthmaster.scheduler.snapshot import pod_key

        return self.snapshot.get_pod(pod_key(pod))

    def listed_views(self) -> Iterable[PodView]:
        """Every view the snapshot holds (each over the very dict that was listed)."""
        return self.snapshot.pods.values()

    def __call__(self, pod: Pod, node_name: str) -> bool:
        from berthmaster.scheduler.snapshot import pod_key

        key = (pod_key(pod), node_name)
        if key not in self._answers:
            with self._without(pod):
                self._answers[key] = bool(self.engine.fits(pod, node_name, self.snapshot))
        return self._answers[key]

    def feasible(self, pod: Pod, names: Sequence[str]) -> list[str]:
        """Every one of ``names`` the pod fits on."""
        with self._without(pod):
            return self.engine.feasible_nodes(pod, self.snapshot, candidates=names)

    def any_node(self, pod: Pod, names: Sequence[str], exclude: str = "") -> bool:
        """Whether the pod fits on at least one of ``names`` other than ``exclude``.

        Asked once per evicted pod (the DefaultEvictor's nodeFit), so :meth:`_without` is
        written out here: a generator-based context manager costs as much as the removal."""
        from berthmaster.scheduler.snapshot import pod_key

        snapshot = self.snapshot
        key = pod_key(pod)
        present = snapshot.get_pod(key)
        if present is not None:
            snapshot.remove_pod(key)
        try:
            others = (n for n in names if n != exclude)
            return self.engine.first_feasible(pod, snapshot, others) is not None
        finally:
            if present is not None:
                snapshot.upsert_view(present)


def engine_node_fit(
    nodes: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    namespaces: Iterable[dict[str, Any]] = (),
    pdbs: Iterable[dict[str, Any]] = (),
    priority_classes: Iterable[dict[str, Any]] = (),
    volumes: VolumeObjects = NO_VOLUMES,
) -> EngineFit:
    """A ``node_fit`` backed by the placement engine over one snapshot of the cluster."""
    return EngineFit(nodes, pods, namespaces, pdbs, priority_classes, volumes)
