"""Drain planning: what is evicted, what is left, how failures read."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta

import pytest

from berthmaster.foundation.durations import parse_go_timedelta
from berthmaster.operator.machines.controller import MachineController
from berthmaster.operator.machines.drain import (
    DrainFailure,
    after_failure,
    aggregate,
    cordon_failed,
    cordoned_control_plane_node,
    drain_not_permitted,
    eviction_body,
    eviction_error,
    global_timeout_error,
    must_check_control_plane_peers,
    namespace_terminating,
    node_drained_message,
    node_is_unreachable,
    plan_drain,
    wait_timeout_error,
)
from tests.unit.operator.machines.machine_builders import make_pod

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)


def test_plan_skips_daemonset_and_mirror_pods_and_evicts_the_rest() -> None:
    pods = [make_pod("web", owner_kind="ReplicaSet"), make_pod("agent", owner_kind="DaemonSet"),
            make_pod("static", owner_kind="Node", mirror=True), make_pod("bare", owner_kind=None),
            make_pod("job", owner_kind="Job")]
    plan = plan_drain(pods, unreachable=False, now=NOW)
    assert [p["metadata"]["name"] for p in plan.evict] == ["web", "bare", "job"]
    assert [(p["metadata"]["name"], why) for p, why in plan.ignored] == [
        ("agent", "DaemonSet-managed"), ("static", "mirror pod")]


def test_unreachable_node_stops_waiting_for_long_terminating_pods() -> None:
    stuck = make_pod("stuck", deleted_at="2026-01-01T00:00:00Z")
    fresh = make_pod("fresh", deleted_at="2026-01-01T00:00:10Z")
    assert [p["metadata"]["name"] for p in plan_drain([stuck, fresh], unreachable=True,
                                                      now=NOW).evict] == ["fresh"]
    assert len(plan_drain([stuck, fresh], unreachable=False, now=NOW).evict) == 2


def test_eviction_body_and_grace_on_unreachable_nodes() -> None:
    pod = make_pod("web")
    assert eviction_body(pod, unreachable=False) == {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "web", "namespace": "ns"}}
    assert eviction_body(pod, unreachable=True)["deleteOptions"] == {"gracePeriodSeconds": 1}
    assert eviction_error(pod, "Cannot evict pod as it would violate the pod's disruption "
                               "budget.") == ('error when evicting pods/"web" -n "ns": Cannot '
                                              "evict pod as it would violate the pod's "
                                              "disruption budget.")


def test_node_unreachable_is_ready_unknown() -> None:
    node = {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert node_is_unreachable(node)
    assert not node_is_unreachable({"status": {"conditions": [{"type": "Ready",
                                                              "status": "False"}]}})


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400),
                                               ("1.5m", 90), ("500ms", 0.5),
                                               # Go's other units (MachineHealthCheck timeouts)
                                               ("2h45m", 9900), ("1500us", 0.0015),
                                               ("1500µs", 0.0015), ("2000000ns", 0.002)])
def test_drain_timeout_durations(text: str, seconds: float) -> None:
    assert parse_go_timedelta(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5", "5 minutes", "m5", "-5m"])
def test_drain_timeout_durations_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_go_timedelta(text)


def node(name: str, *, role: str | None = None, cordoned: bool = False) -> dict:
    labels = {f"node-role.kubernetes.io/{role}": ""} if role else {}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": True} if cordoned else {}}


@pytest.mark.parametrize(("draining", "others", "blocked_by"), [
    (node("w", role="worker"), [node("m1", role="master", cordoned=True)], None),
    (node("m0", role="master"), [node("m1", role="master", cordoned=True)], "m1"),
    (node("m0", role="control-plane"), [node("m1", role="control-plane", cordoned=True)], "m1"),
    (node("m0", role="master"), [node("m1", role="master"), node("m2", role="master")], None),
    (node("m0", role="master"), [node("w1", role="worker", cordoned=True)], None),
    (node("m0", role="master", cordoned=True),          # resumes its own interrupted drain
     [node("m1", role="master", cordoned=True)], None),
])
def test_control_plane_drain_waits_for_a_cordoned_peer(
        draining: dict, others: list[dict], blocked_by: str | None) -> None:
    """openshift/machine-api-operator pkg/controller/machine/drain_controller.go,
    isDrainAllowed / isControlPlaneNode: a cordoned node may always go on draining, a worker
    always drains, and a control-plane node (label node-role.kubernetes.io/control-plane or
    .../master) is not drained while another control-plane node is cordoned."""
    blocker = cordoned_control_plane_node([draining, *others]) \
        if must_check_control_plane_peers(draining) else None
    assert blocker == blocked_by


def test_requeue_after_messages_are_upstreams() -> None:
    """drain_controller.go drainNode wraps isDrainAllowed's RequeueAfterError (errors.go:
    "requeue in: %s") as "drain not permitted: %w"; a failed cordon is the bare
    RequeueAfterError. Both retry after a fixed 20 s instead of the backoff."""
    assert drain_not_permitted().message == "drain not permitted: requeue in: 20s"
    assert cordon_failed().message == "requeue in: 20s"
    assert drain_not_permitted().requeue_after == timedelta(seconds=20)


def test_timeout_messages_are_kubectl_drains() -> None:
    """k8s.io/kubectl pkg/drain/drain.go, evictPods: a pod whose eviction is still refused when
    the global timeout ends, and one evicted but still there (waitForDelete's context error)."""
    pod = make_pod("web-0")
    assert global_timeout_error(pod, timedelta(seconds=20)) == (
        'error when evicting pods/"web-0" -n "ns": global timeout reached: 20s')
    assert wait_timeout_error(pod) == ('error when waiting for pod "web-0" in namespace "ns" to '
                                       "terminate: context deadline exceeded")


@pytest.mark.parametrize(("errors", "text"), [
    (["a"], "a"),
    (["a", "b"], "[a, b]"),
    (["a", "a"], "a"),
    (["a", "b", "a"], "[a, b]"),
])
def test_errors_aggregate_as_apimachinery(errors: list[str], text: str) -> None:
    """k8s.io/apimachinery pkg/util/errors/errors.go, aggregate.Error (RunNodeDrain returns
    utilerrors.NewAggregate of the per-pod errors)."""
    assert aggregate(errors) == text


def test_deleted_event_message() -> None:
    """drain_controller.go drainNode: Eventf(..., "Deleted", ..., "Node %q drained", node.Name)."""
    assert node_drained_message("worker-1") == 'Node "worker-1" drained'


def test_namespace_terminating_cause() -> None:
    body = {"kind": "Status", "reason": "Forbidden",
            "details": {"causes": [{"type": "NamespaceTerminating"}]}}
    assert namespace_terminating(body)
    assert not namespace_terminating({"kind": "Status", "reason": "Forbidden"})


def test_failed_drain_backs_off_as_upstreams_rate_limiter() -> None:
    """machine-api-operator pkg/controller/machine/drain_controller.go ``newDrainRateLimiter``:
    a drain that returned an error is retried after 5 s doubled per consecutive failure, at
    most 1000 s (client-go's ItemExponentialFailureRateLimiter); a RequeueAfterError requeues
    after its fixed 20 s and controller-runtime forgets the item, so the backoff restarts."""
    failed = DrainFailure("error when evicting pods")
    delays, failures = [], 0
    for _ in range(10):
        delay, failures = after_failure(failed, failures)
        delays.append(delay)
    assert delays == [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]
    assert after_failure(drain_not_permitted(), failures) == (20.0, 0)
    assert after_failure(failed, 0) == (5.0, 1)
    defaults = inspect.signature(MachineController).parameters
    assert (defaults["drain_backoff"].default, defaults["drain_backoff_cap"].default) == (5, 1000)
