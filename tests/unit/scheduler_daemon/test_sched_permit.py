"""Permit's waiting pods and the order the binding-cycle points run in.

Upstream: pkg/scheduler/framework/runtime/waiting_pods_map.go (a pod waits until every
waiting plugin allows it; any rejection or a plugin's timeout ends the wait with
``rejected due to timeout after waiting <d> at plugin <name>``) and runtime/framework.go
(RunReservePluginsReserve stops at the first failure, RunReservePluginsUnreserve runs in
reverse order, RunPermitPlugins: the first rejection wins, otherwise Wait).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from berthmaster.scheduler.daemon.extensions import Extensions, Rejection
from berthmaster.scheduler.daemon.waiting import WaitingPod, WaitingPods
from berthmaster.scheduler.framework import CycleState, Lifecycle, Wait
from berthmaster.scheduler.plugins.base import Status, unschedulable

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"}, "spec": {}}


async def test_a_waiting_pod_goes_on_once_every_waiting_plugin_allows_it() -> None:
    waiting = WaitingPod(POD, {"A": 600.0, "B": 600.0})
    waiting.allow("A")
    assert waiting.pending_plugins() == ["B"]
    waiting.allow("B")
    assert await waiting.wait() is None


async def test_a_rejection_ends_the_wait_and_later_calls_change_nothing() -> None:
    waiting = WaitingPod(POD, {"A": 600.0})
    waiting.reject("A", "no room")
    waiting.allow("A")
    status = await waiting.wait()
    assert status == unschedulable("no room")
    assert waiting.rejected_by == "A"


async def test_a_plugins_timeout_rejects_the_pod_in_upstreams_words() -> None:
    waiting = WaitingPod(POD, {"Gang": 0.01})
    status = await waiting.wait()
    assert status is not None
    assert status.reasons == ("rejected due to timeout after waiting 10ms at plugin Gang",)


@dataclass
class Recording(Lifecycle):
    NAME: ClassVar[str] = "Recording"
    calls: list[str] = field(default_factory=list)
    reserve_status: Status | None = None
    permit_result: Status | Wait | None = None

    def reserve(self, state: CycleState, pod: dict[str, Any], node: str) -> Status | None:
        self.calls.append(f"reserve {self.name}")
        return self.reserve_status

    def unreserve(self, state: CycleState, pod: dict[str, Any], node: str) -> None:
        self.calls.append(f"unreserve {self.name}")

    def permit(self, state: CycleState, pod: dict[str, Any], node: str
               ) -> Status | Wait | None:
        return self.permit_result


def test_reserve_stops_at_the_first_failure_and_unreserve_runs_in_reverse() -> None:
    calls: list[str] = []
    no = unschedulable("taken")
    plugins = [Recording(name="A", calls=calls), Recording(name="B", calls=calls,
                                                           reserve_status=no),
               Recording(name="C", calls=calls)]
    ext = Extensions({"reserve": plugins}, WaitingPods())
    state = CycleState()
    assert ext.reserve(state, POD, "n") == Rejection(no, "B")
    ext.unreserve(state, POD, "n")
    assert calls == ["reserve A", "reserve B", "unreserve C", "unreserve B", "unreserve A"]


async def test_permit_rejection_wins_else_the_pod_waits() -> None:
    waiting = WaitingPods()
    no = unschedulable("not yet")
    rejecting = Extensions({"permit": [Recording(name="A", permit_result=Wait(5.0)),
                                       Recording(name="B", permit_result=no)]}, waiting)
    assert rejecting.permit(CycleState(), POD, "n") == Rejection(no, "B")
    assert len(waiting) == 0
    waits = Extensions({"permit": [Recording(name="A", permit_result=Wait(5.0)),
                                   Recording(name="B")]}, waiting)
    outcome = waits.permit(CycleState(), POD, "n")
    assert isinstance(outcome, Wait)
    assert outcome.message == 'one or more plugins asked to wait and no plugin rejected pod "p"'
    held = waiting.get("uid-p")
    assert held is not None and held.pending_plugins() == ["A"]
    held.allow("A")
    assert await waits.wait_on_permit(POD) is None
    assert waiting.get("uid-p") is None


def test_a_profile_with_coscheduling_needs_the_podgroup_crd_and_its_verbs() -> None:
    """Checked before the scheduler starts (berthmaster.foundation.access), as its own needs are."""
    from berthmaster.foundation.access import Access, Resource
    from berthmaster.scheduler.config import default_config, load_config
    from berthmaster.scheduler.daemon.service import plugin_needs

    assert plugin_needs(default_config()) == []
    config = load_config("profiles: [{schedulerName: gangs, plugins: {multiPoint: {enabled: "
                         "[{name: Coscheduling}]}, queueSort: {enabled: [{name: Coscheduling}],"
                         " disabled: [{name: '*'}]}}}]")
    (needs,) = plugin_needs(config)
    assert needs.resources == (Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups"),)
    assert needs.access == (Access("list", "podgroups", "scheduling.x-k8s.io"),
                            Access("watch", "podgroups", "scheduling.x-k8s.io"))


def test_every_profile_names_the_same_queue_sort() -> None:
    """validation.go, validateCommonQueueSort."""
    import pytest

    from berthmaster.foundation.errors import PolicyError
    from berthmaster.scheduler.config import load_config

    with pytest.raises(PolicyError) as error:
        load_config("profiles: [{schedulerName: a}, {schedulerName: b, plugins: {queueSort: "
                    "{enabled: [{name: Coscheduling}], disabled: [{name: '*'}]}}}]")
    assert ('profiles[1].plugins.queueSort: Invalid value: "Coscheduling": must be the same '
            "for all profiles") in str(error.value)


def test_each_point_runs_its_plugins_in_the_profiles_order() -> None:
    """A plugin enabled through multiPoint is appended after the defaults at every point
    (default_plugins.go mergePluginSet; runtime/framework.go expandMultiPointPlugins): at
    Reserve, VolumeBinding's runs before Coscheduling's."""
    from berthmaster.scheduler.config import load_config
    from berthmaster.scheduler.daemon.extensions import SchedulerHandle
    from berthmaster.scheduler.daemon.volumes import VolumeBinder
    from berthmaster.scheduler.snapshot import Snapshot

    config = load_config("profiles: [{schedulerName: gangs, plugins: {multiPoint: {enabled: "
                         "[{name: Coscheduling}]}, queueSort: {enabled: [{name: Coscheduling}],"
                         " disabled: [{name: '*'}]}}}]")
    snapshot = Snapshot()
    ext = Extensions.build(config.profiles[0], SchedulerHandle(snapshot, WaitingPods()),
                           VolumeBinder(None, snapshot), lambda: True)  # type: ignore[arg-type]
    names = {point: [p.name for p in ext.plugins(point)]
             for point in ("queueSort", "postFilter", "reserve", "permit", "preBind", "bind")}
    assert names == {"queueSort": ["Coscheduling"], "postFilter": ["Coscheduling"],
                     "reserve": ["VolumeBinding", "Coscheduling"], "permit": ["Coscheduling"],
                     "preBind": ["VolumeBinding"], "bind": ["DefaultBinder"]}
    assert ext.sort_key() is not None
