"""One profile's plugins after the decision: QueueSort, PostFilter, Reserve/Unreserve, Permit,
PreBind, Bind, PostBind — how each point runs, as ``pkg/scheduler/framework/runtime/
framework.go`` runs them (RunReservePluginsReserve / Unreserve, RunPermitPlugins,
WaitOnPermit, RunPreBindPlugins, RunBindPlugins, RunPostBindPlugins).

Design: :class:`Extensions` holds the profile's :class:`~berthmaster.scheduler.framework.
Lifecycle` objects per point, in profile order, built once by the daemon with one
:class:`SchedulerHandle` (shared by every profile, as the waiting pods are). The scheduling
loop calls :meth:`Extensions.reserve` and :meth:`Extensions.permit` synchronously right after
assuming the pod; the binder's task awaits :meth:`Extensions.wait_on_permit`, then PreBind,
Bind and PostBind, so a pod waiting at Permit holds up nothing but itself.

- Reserve stops at the first failure; the caller then runs every Unreserve in reverse order
  (Unreserve is idempotent by contract), as upstream does on any failure after Reserve.
- Permit: the first rejection wins; otherwise the pod waits when any plugin said
  :class:`~berthmaster.scheduler.framework.Wait` (the shortest of nothing: one timer per
  plugin, capped at 15 minutes, :mod:`.waiting`).
- Bind: the first plugin that does not answer Skip decides; ``DefaultBinder`` is the
  binder's own Binding POST (:data:`DEFAULT_BINDER`).
- A plugin that raises is an Error status, in upstream's words
  (:class:`~berthmaster.scheduler.framework.PluginError`), never a crash.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.logs import ObjectRef
from berthmaster.scheduler.daemon.volumes import (
    NotLeader,
    PreBindError,
    VolumeBinder,
    VolumeBindingLifecycle,
)
from berthmaster.scheduler.daemon.waiting import WaitingPod, WaitingPods
from berthmaster.scheduler.framework import (
    SKIP,
    CycleState,
    Lifecycle,
    PluginError,
    Wait,
)
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins.base import Predicate, Status
from berthmaster.scheduler.policy import Policy
from berthmaster.scheduler.snapshot import Snapshot, pod_key

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.extensions")

DEFAULT_BINDER = "DefaultBinder"
VOLUME_BINDING = "VolumeBinding"


class SchedulerHandle:
    """framework.Handle for the daemon's Lifecycles; see :class:`~berthmaster.scheduler.
    framework.Handle`. ``activate`` is set by the daemon to the queue's."""

    def __init__(self, snapshot: Snapshot, waiting: WaitingPods,
                 activate: Callable[[Sequence[JSON]], object] = lambda pods: None,
                 predicates: Mapping[str, Predicate] | None = None):
        self._snapshot = snapshot
        self.waiting = waiting
        self._activate = activate
        self._predicates = dict(predicates or {})

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def iterate_over_waiting_pods(self) -> Iterator[WaitingPod]:
        return iter(self.waiting)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting = self.waiting.get(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")
        return True

    def activate(self, pods: Sequence[JSON]) -> None:
        self._activate(pods)

    def predicate(self, name: str) -> Predicate | None:
        return self._predicates.get(name)

    def for_profile(self, predicates: Sequence[Predicate]) -> SchedulerHandle:
        """The same handle, knowing one profile's filter plugins by name."""
        return SchedulerHandle(self._snapshot, self.waiting, self.activate,
                               {p.name: p for p in predicates})


@dataclass(frozen=True)
class Rejection:
    """A Reserve or Permit failure: the plugin's status and name."""

    status: Status
    plugin: str


class Extensions:
    """One profile's post-decision plugins; see the module docstring."""

    def __init__(self, by_point: Mapping[str, Sequence[Lifecycle]], waiting: WaitingPods,
                 predicates: Sequence[Predicate] = (),
                 on_wait: Callable[[str, float], None] | None = None):
        self.by_point = {point: tuple(plugins) for point, plugins in by_point.items()}
        self.waiting = waiting
        self.predicates = {p.name: p for p in predicates}
        # (result code, seconds) of each WaitOnPermit: scheduler_permit_wait_duration_seconds
        self.on_wait = on_wait

    def hint_events(self, pod: JSON, plugin: str) -> frozenset[str] | None:
        """The queueing hints for a pod ``plugin`` rejected at Reserve or Permit: its filter
        plugin's, when it has one (None: the queue's defaults)."""
        predicate = self.predicates.get(plugin)
        if predicate is None:
            return None
        try:
            return frozenset(predicate.events_for(PodView.from_dict(pod))) or None
        except Exception:  # a failing hint must not narrow what wakes the pod
            log.exception("queueing hint failed", extra={"plugin": plugin})
            return None

    @classmethod
    def build(cls, policy: Policy, handle: SchedulerHandle, volumes: VolumeBinder,
              may_act: Callable[[], bool],
              on_wait: Callable[[str, float], None] | None = None) -> Extensions:
        """Instantiate the profile's Lifecycles (the in-tree VolumeBinding's and
        DefaultBinder's included) and order them per point."""
        profile_handle = handle.for_profile(policy.predicates)
        by_point: dict[str, list[Lifecycle]] = {}
        instances: dict[str, Lifecycle] = {}
        for ext in policy.extensions:
            instance: Lifecycle
            if ext.lifecycle is not None:
                instance = ext.lifecycle(name=ext.name, args=dict(ext.args or {}),
                                         handle=profile_handle)
            elif ext.name == VOLUME_BINDING:
                instance = VolumeBindingLifecycle(name=ext.name, volumes=volumes,
                                                  may_act=may_act)
            else:
                instance = Lifecycle(name=ext.name)  # DefaultBinder: the binder's POST
            instances[ext.name] = instance
            for point in ext.points:
                by_point.setdefault(point, []).append(instance)
        for point, names in policy.point_order:  # each point in the profile's own order
            by_point[point] = [instances[n] for n in names if n in instances]
        return cls(by_point, handle.waiting, policy.predicates, on_wait)

    def plugins(self, point: str) -> tuple[Lifecycle, ...]:
        return self.by_point.get(point, ())

    # ---- the scheduling cycle (synchronous) -------------------------------------------------
    def reserve(self, state: CycleState, pod: JSON, node: str) -> Rejection | None:
        for plugin in self.plugins("reserve"):
            try:
                status = plugin.reserve(state, pod, node)
            except (PreBindError, NotLeader):
                raise
            except Exception as error:
                raise PluginError(plugin.name, "Reserve", error) from error
            if status is not None:
                return Rejection(status, plugin.name)
        return None

    def unreserve(self, state: CycleState, pod: JSON, node: str) -> None:
        for plugin in reversed(self.plugins("reserve")):
            try:
                plugin.unreserve(state, pod, node)
            except Exception:  # one plugin's failure must not skip the others' cleanup
                log.exception("unreserve failed", extra={"plugin": plugin.name,
                                                         "pod": ObjectRef.of(pod)})

    def permit(self, state: CycleState, pod: JSON, node: str) -> Rejection | Wait | None:
        waits: dict[str, float] = {}
        for plugin in self.plugins("permit"):
            try:
                result = plugin.permit(state, pod, node)
            except Exception as error:
                raise PluginError(plugin.name, "Permit", error) from error
            if isinstance(result, Status):
                return Rejection(result, plugin.name)
            if isinstance(result, Wait):
                waits[plugin.name] = result.timeout
        if not waits:
            return None
        self.waiting.add(WaitingPod(pod, waits))
        name = (pod.get("metadata") or {}).get("name")
        return Wait(min(waits.values()), f"one or more plugins asked to wait and no plugin "
                                         f'rejected pod "{name}"')

    def post_filter(self, pod: JSON) -> list[str]:
        """The PostFilter plugins' messages (after preemption found nothing)."""
        messages = []
        for plugin in self.plugins("postFilter"):
            try:
                message = plugin.post_filter(pod)
            except Exception:
                log.exception("post filter failed", extra={"plugin": plugin.name,
                                                           "pod": ObjectRef.of(pod)})
                continue
            if message:
                messages.append(message)
        return messages

    def sort_key(self) -> Callable[[JSON, int, float], tuple[Any, ...]] | None:
        """The QueueSort plugin's key, None for PrioritySort."""
        sorts = self.plugins("queueSort")
        return sorts[0].sort_key if sorts else None

    # ---- the binding cycle (the binder's task) ----------------------------------------------
    async def wait_on_permit(self, pod: JSON) -> Rejection | None:
        uid = pod_key(pod)
        waiting = self.waiting.get(uid)
        if waiting is None:
            return None
        started = time.perf_counter()
        try:
            status = await waiting.wait()
        finally:
            self.waiting.remove(uid)
        if self.on_wait is not None:
            self.on_wait("Success" if status is None else "Unschedulable",
                         time.perf_counter() - started)
        return None if status is None else Rejection(status, waiting.rejected_by)

    async def pre_bind(self, state: CycleState, pod: JSON, node: str) -> None:
        """Raises PreBindError (worded for the failing plugin) or NotLeader."""
        for plugin in self.plugins("preBind"):
            try:
                status = await plugin.pre_bind(state, pod, node)
            except (PreBindError, NotLeader):
                raise
            except Exception as error:
                raise PreBindError(str(error), plugin=plugin.name) from error
            if status is not None:
                raise PreBindError("; ".join(status.reasons), plugin=plugin.name)

    async def bind(self, state: CycleState, pod: JSON, node: str) -> str | None:
        """The out-of-tree bind plugins before DefaultBinder: returns the name of the plugin
        that bound the pod, or None when DefaultBinder is to POST the binding. Raises
        PluginError when a plugin fails."""
        for plugin in self.plugins("bind"):
            if plugin.name == DEFAULT_BINDER:
                return None
            try:
                result = await plugin.bind(state, pod, node)
            except Exception as error:
                raise PluginError(plugin.name, "Bind", error) from error
            if result is SKIP:
                continue
            if isinstance(result, Status):
                raise PluginError(plugin.name, "Bind", "; ".join(result.reasons))
            return plugin.name
        return None

    def post_bind(self, state: CycleState, pod: JSON, node: str) -> None:
        for plugin in self.plugins("postBind"):
            try:
                plugin.post_bind(state, pod, node)
            except Exception:
                log.exception("post bind failed", extra={"plugin": plugin.name,
                                                         "pod": ObjectRef.of(pod)})
