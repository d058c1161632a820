"""One descheduler pass: LIST once, decide per strategy, evict, summarise.

Design: :func:`list_cluster` issues exactly one (paged) LIST per resource type — nodes, pods,
namespaces, PriorityClasses, PodDisruptionBudgets, and the volume objects nodeFit's placement
engine judges claims with (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
CSIDrivers, CSIStorageCapacities: ``berthmaster.scheduler.volume_objects``) — never a request
per node or per pod.
:func:`prepare` indexes them into a :class:`ClusterState` with the engine-backed ``node_fit``.
:func:`run_pass` then runs the policy's strategies in order (every ``deschedule`` strategy, then
every ``balance`` one) over that one state, each through the :class:`Evictor`; a pod evicted by
one strategy is invisible to the next. :func:`plan_pass` is the same loop without I/O (every
admissible candidate counts as evicted), used by the benchmark. A strategy that raises is
recorded as failed and the pass goes on with the next one.

:func:`prepare` runs with the cyclic garbage collector paused (:func:`gc_paused`): it allocates
about a million objects (views, indexes) that all live for the whole pass and form no garbage,
and every generation-2 collection those allocations trigger re-scans all of them and the listed
objects — about a quarter of the build at 50,000 pods. The command prepares through
:func:`prepare_for_pass`, which also freezes what the build left (as the scheduler daemon does
after its initial sync) so the decisions and the evictions do not re-scan it either;
:func:`plan_pass`, pure and bounded, pauses the collector as :func:`prepare` does.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.scheduler.descheduler.context import ClusterState, NodeFit, StrategyContext, Tally
from berthmaster.scheduler.descheduler.evictor import (
    EvictionBook,
    Evictor,
    drive,
    drive_planned,
    planned_attempt,
)
from berthmaster.scheduler.descheduler.policy import DeschedulerPolicy
from berthmaster.scheduler.descheduler.strategies import REGISTRY
from berthmaster.scheduler.volume_objects import VolumeObjects, list_volume_objects

Obj = dict[str, Any]


@dataclass
class ClusterObjects:
    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    namespaces: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    volumes: VolumeObjects = field(default_factory=VolumeObjects)


async def list_cluster(kube: KubeClient) -> ClusterObjects:
    """One LIST per resource type."""
    nodes, _ = await kube.list_all(resource_path(CORE, "nodes"))
    pods, _ = await kube.list_all(resource_path(CORE, "pods"))
    namespaces, _ = await kube.list_all(resource_path(CORE, "namespaces"))
    classes, _ = await kube.list_all(
        resource_path(group_path("scheduling.k8s.io", "v1"), "priorityclasses"))
    pdbs, _ = await kube.list_all(resource_path(group_path("policy", "v1"),
                                                "poddisruptionbudgets"))
    return ClusterObjects(nodes, pods, namespaces, classes, pdbs,
                          await list_volume_objects(kube))


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (back on after it, if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def prepare(
    objects: ClusterObjects, policy: DeschedulerPolicy, node_fit: NodeFit | None = None,
    now: datetime | None = None,
) -> ClusterState:
    with gc_paused():
        if node_fit is None:
            from berthmaster.scheduler.descheduler.fit import engine_node_fit

            node_fit = engine_node_fit(objects.nodes, objects.pods, objects.namespaces,
                                       objects.pdbs, objects.priority_classes, objects.volumes)
        return ClusterState(
            objects.nodes, objects.pods,
            priority_classes={c["metadata"]["name"]: int(c.get("value", 0))
                              for c in objects.priority_classes},
            namespace_labels={n["metadata"]["name"]: (n["metadata"].get("labels") or {})
                              for n in objects.namespaces},
            node_selector=policy.node_selector, node_fit=node_fit, now=now, pdbs=objects.pdbs,
            claims=objects.volumes.persistent_volume_claims,
        )


def book_for(policy: DeschedulerPolicy) -> EvictionBook:
    return EvictionBook(policy.max_pods_per_node, policy.max_pods_per_namespace,
                        policy.max_pods_total)


async def run_pass(
    state: ClusterState, policy: DeschedulerPolicy, kube: KubeClient | None, dry_run: bool,
    say: Callable[[str], None] = print, background: bool = False,
) -> list[Tally]:
    """``background``: the EvictionsInBackground gate (features.py, evictor.py)."""
    evictor = Evictor(kube, book_for(policy), dry_run, policy.grace_period_seconds, say,
                      failure_events=policy.eviction_failure_events, background=background)
    under_way = evictor.count_in_background(
        pod for pods in state.pods_by_node.values() for pod in pods)
    if under_way:
        say(f"{under_way} eviction(s) in background under way, counted against the limits")
    tallies = []
    for config in policy.strategies:
        tally = Tally(config.name, config.profile)
        tallies.append(tally)
        try:
            ctx = StrategyContext(state, config.evictor, tally)

            async def attempt(candidate: Any, ctx: StrategyContext = ctx) -> bool:
                return await evictor.attempt(candidate, ctx)

            await drive(REGISTRY[config.name].decide(config.params, ctx), attempt)
        except Exception as error:  # one broken strategy must not stop the others
            tally.failure = f"{type(error).__name__}: {error}"
            say(f"{config.name}: failed: {tally.failure}")
    return tallies


def plan_pass(state: ClusterState, policy: DeschedulerPolicy) -> list[Tally]:
    """The pass without I/O: what would be evicted, for benchmarks and offline plans (pure and
    bounded, so it too runs with the collector paused)."""
    book = book_for(policy)
    tallies = []
    with gc_paused():
        for config in policy.strategies:
            tally = Tally(config.name, config.profile)
            tallies.append(tally)
            ctx = StrategyContext(state, config.evictor, tally)
            drive_planned(REGISTRY[config.name].decide(config.params, ctx),
                          planned_attempt(book, ctx))
    return tallies


def prepare_for_pass(
    objects: ClusterObjects, policy: DeschedulerPolicy, now: datetime | None = None,
) -> ClusterState:
    """:func:`prepare` for a process that runs one pass (the command, as the descheduler Job
    runs it, and the benchmark): what was LISTed and built lives until the pass ends, so it is
    moved into the collector's permanent generation (``gc.freeze``, as the scheduler daemon
    does after its initial sync) before the collector resumes. Frozen while still paused:
    resuming first would make the next allocation collect the million objects the build left
    in the youngest generation. Process-wide, so not for a library caller."""
    with gc_paused():
        state = prepare(objects, policy, now=now)
        gc.freeze()
    return state
