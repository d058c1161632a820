"""The scheduling queue on a fake clock: order, backoff, parking and the events that wake pods."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.daemon.hints import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_UPDATE,
    ClusterEvent,
)
from berthmaster.scheduler.daemon.queue import SchedulingQueue
from tests.support.clock import FakeClock


def make_pod(name: str, ns: str = "default", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
            "spec": {"schedulerName": "berthmaster", **spec}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def queue(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(clock=clock)


def pop_names(queue: SchedulingQueue) -> list[str]:
    names = []
    while (info := queue.pop_nowait()) is not None:
        names.append(info.pod["metadata"]["name"])
    return names


def test_higher_priority_first_then_oldest(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("low-old"), priority=0)
    clock.tick(1)
    queue.add(make_pod("high"), priority=100)
    clock.tick(1)
    queue.add(make_pod("low-new"), priority=0)
    assert pop_names(queue) == ["high", "low-old", "low-new"]


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)],
)
def test_backoff_doubles_from_one_second_capped_at_ten(
    queue: SchedulingQueue, clock: FakeClock, attempts: int, expected: float
) -> None:
    queue.add(make_pod("p"), priority=0)
    for _ in range(attempts):
        info = queue.pop_nowait()
        assert info is not None
        queue.requeue(info, unschedulable=False)
        if _ < attempts - 1:
            clock.tick(60)
    clock.tick(expected - 0.01)
    assert queue.pop_nowait() is None, "still backing off"
    clock.tick(0.02)
    assert queue.pop_nowait() is not None


def test_unschedulable_pod_waits_for_a_helpful_event(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.requeue(info, unschedulable=True)
    clock.tick(30)
    assert queue.pop_nowait() is None, "parked: no event yet, backoff long over"
    assert queue.counts()["unschedulable"] == 1
    # A heartbeat (no placement-relevant change) does not wake it...
    assert queue.move_for_event(ClusterEvent(NODE_UPDATE, frozenset())) == 0
    # ...and a new assigned pod cannot help a pod without pod affinity or spread.
    assert queue.move_for_event(ClusterEvent(ASSIGNED_POD_ADD)) == 0
    assert queue.pop_nowait() is None
    # A new node can.
    assert queue.move_for_event(ClusterEvent(NODE_ADD)) == 1
    again = queue.pop_nowait()
    assert again is not None and again.attempts == 2


def test_event_moves_to_backoff_when_backoff_not_over(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.requeue(info, unschedulable=True)
    clock.tick(0.5)
    queue.move_for_event(ClusterEvent(ASSIGNED_POD_DELETE))
    assert queue.counts()["backoff"] == 1
    assert queue.pop_nowait() is None
    clock.tick(0.6)
    assert queue.pop_nowait() is not None


def test_parked_pod_flushed_after_five_minutes(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.requeue(info, unschedulable=True)
    clock.tick(299)
    assert queue.pop_nowait() is None
    assert queue.next_wakeup() == pytest.approx(1.0)
    clock.tick(1)
    assert queue.pop_nowait() is not None


def test_event_during_attempt_sends_pod_to_backoff_not_parking(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.move_for_event(ClusterEvent(NODE_ADD))  # arrives while the pod is in flight
    queue.requeue(info, unschedulable=True)
    assert queue.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


def test_only_events_after_its_pop_count_for_an_in_flight_pod(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    """The in-flight log: an event logged while another pod was in flight, before this one
    was popped, is not one that arrived during this pod's attempt."""
    queue.add(make_pod("a"), priority=1)
    queue.add(make_pod("b"), priority=0)
    first = queue.pop_nowait()
    assert first is not None and first.key == "default/a"
    queue.move_for_event(ClusterEvent(NODE_ADD))  # during a's attempt only
    second = queue.pop_nowait()
    assert second is not None and second.key == "default/b"
    queue.requeue(second, unschedulable=True)
    assert queue.counts()["unschedulable"] == 1  # b saw no event of its own
    queue.requeue(first, unschedulable=True)
    assert queue.counts()["backoff"] == 1  # a did


def test_the_in_flight_log_keeps_what_a_long_attempt_still_needs(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    """A pod in flight across many events (a slow binding) still sees the one that could help
    it after the log has been trimmed for the pods that came and went."""
    queue.add(make_pod("slow"), priority=1)
    slow = queue.pop_nowait()
    assert slow is not None
    queue.move_for_event(ClusterEvent(NODE_ADD))
    for i in range(3000):
        queue.add(make_pod(f"p{i}"), priority=0)
        info = queue.pop_nowait()
        assert info is not None
        queue.move_for_event(ClusterEvent(ASSIGNED_POD_ADD))
        queue.done(info.key)
    queue.requeue(slow, unschedulable=True)
    assert queue.counts()["backoff"] == 1


def test_in_flight_pod_is_not_popped_twice_and_keeps_latest_object(
    queue: SchedulingQueue,
) -> None:
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    updated = make_pod("p", tolerations=[{"operator": "Exists"}])
    queue.add(updated, priority=0)
    assert queue.pop_nowait() is None
    assert info.pod is updated
    queue.done(info.key)
    assert "default/p" not in queue


def test_deleted_while_in_flight_is_dropped_on_requeue(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.delete(info.key)
    queue.requeue(info, unschedulable=True)
    assert len(queue) == 0 and info.key not in queue


def test_spec_update_wakes_parked_pod_but_status_update_does_not(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    pod = make_pod("p")
    queue.add(pod, priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.requeue(info, unschedulable=True)
    clock.tick(20)
    queue.add({**pod, "status": {"conditions": [{"type": "PodScheduled"}]}}, priority=0)
    assert queue.pop_nowait() is None
    queue.add(make_pod("p", tolerations=[{"operator": "Exists"}]), priority=0)
    assert queue.pop_nowait() is not None


def test_gated_pod_held_until_gates_removed(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p", schedulingGates=[{"name": "example.com/wait"}]), priority=0)
    assert queue.counts()["gated"] == 1
    assert queue.pop_nowait() is None
    queue.add(make_pod("p"), priority=0)
    assert queue.pop_nowait() is not None


def test_pod_affinity_pod_woken_by_new_assigned_pod(queue: SchedulingQueue) -> None:
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    queue.add(make_pod("p", affinity=affinity), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    queue.requeue(info, unschedulable=True)
    assert queue.move_for_event(ClusterEvent(ASSIGNED_POD_ADD)) == 1


def test_pending_counts_reported_on_change(queue: SchedulingQueue) -> None:
    seen: list[dict[str, int]] = []
    queue.on_change = seen.append
    queue.add(make_pod("a"), priority=0)
    queue.add(make_pod("b"), priority=0)
    queue.pop_nowait()
    assert seen[-1]["active"] == 1


def test_registered_events_decide_for_the_events_they_name(clock: FakeClock) -> None:
    queue = SchedulingQueue(clock=clock)
    queue.add(make_pod("p"), priority=0)
    info = queue.pop_nowait()
    assert info is not None
    # Rejected by a taint: only a node add or a taint change can help, not a pod deletion.
    queue.requeue(info, unschedulable=True,
                  hint_events=frozenset({"Node/Add", "Node/UpdateNodeTaint"}))
    assert queue.move_for_event(ClusterEvent(ASSIGNED_POD_DELETE)) == 0
    assert queue.move_for_event(ClusterEvent(NODE_UPDATE, frozenset({"labels"}))) == 0
    assert queue.move_for_event(ClusterEvent(NODE_UPDATE, frozenset({"taints"}))) == 1


def test_unschedulable_pods_counted_per_rejecting_predicate_while_parked(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    """scheduler_unschedulable_pods{plugin}: +1 per predicate when a pod is parked, -1 when it
    leaves the unschedulable queue (moved by an event, or deleted)."""
    counts: dict[str, int] = {}

    def record(plugins: frozenset[str], delta: int) -> None:
        for plugin in plugins:
            counts[plugin] = counts.get(plugin, 0) + delta

    queue.on_unschedulable = record
    queue.add(make_pod("a"), priority=0)
    queue.add(make_pod("b"), priority=0)
    a, b = queue.pop_nowait(), queue.pop_nowait()
    assert a is not None and b is not None
    queue.requeue(a, unschedulable=True,
                  rejected_by=frozenset({"PodFitsResources", "PodToleratesNodeTaints"}))
    queue.requeue(b, unschedulable=True, rejected_by=frozenset({"PodFitsResources"}))
    assert counts == {"PodFitsResources": 2, "PodToleratesNodeTaints": 1}
    queue.move_for_event(ClusterEvent(NODE_ADD))
    assert counts == {"PodFitsResources": 0, "PodToleratesNodeTaints": 0}
    clock.tick(20)
    queue.flush()
    c = queue.pop_nowait()
    assert c is not None
    queue.requeue(c, unschedulable=False)  # an error backs the pod off: not counted
    assert counts == {"PodFitsResources": 0, "PodToleratesNodeTaints": 0}
    d = queue.pop_nowait()
    assert d is not None
    queue.requeue(d, unschedulable=True, rejected_by=frozenset({"MatchInterPodAffinity"}))
    assert counts["MatchInterPodAffinity"] == 1
    queue.delete(d.key)
    assert counts["MatchInterPodAffinity"] == 0
