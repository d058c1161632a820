"""Removing a chosen node (cluster-autoscaler core/scaledown/actuation), on a fake clock: which
DaemonSet pods go, how long a refused eviction is retried, the delay-deletion wait."""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import KubeError
from berthmaster.operator.autoscaler.actuation import (
    daemonset_pods_to_evict,
    has_delay_deletion,
    retry_until,
)
from tests.support.clock import FakeClock
from tests.unit.autoscaler.builders import make_node, make_pod

JSON = dict[str, Any]
OPT = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"


def test_daemonset_pods_are_evicted_from_occupied_nodes_only_unless_annotated() -> None:
    """cluster-autoscaler config/flags/flags.go: --daemonset-eviction-for-occupied-nodes true,
    --daemonset-eviction-for-empty-nodes false; utils/daemonset ``PodsToEvict``: a DaemonSet
    pod's enable-ds-eviction annotation "true"/"false" overrides the default; actuation/drain.go
    ``podsToEvict`` leaves mirror pods and non-DaemonSet pods out."""
    plain = make_pod("agent", owner="DaemonSet")
    keep = make_pod("logs", owner="DaemonSet", annotations={OPT: "false"})
    opted = make_pod("dns", owner="DaemonSet", annotations={OPT: "true"})
    app = make_pod("app")
    mirror = make_pod("static", owner=None, annotations={"kubernetes.io/config.mirror": "x"})
    pods = [plain, keep, opted, app, mirror]
    assert [p["metadata"]["name"] for p in daemonset_pods_to_evict(pods, occupied=True)] == [
        "agent", "dns"]
    assert [p["metadata"]["name"] for p in daemonset_pods_to_evict(pods, occupied=False)] == [
        "dns"]


def test_delay_deletion_annotations_are_matched_by_prefix() -> None:
    """cluster-autoscaler core/scaledown/actuation/delay.go ``hasDelayDeletionAnnotation``."""
    assert has_delay_deletion(make_node("n", annotations={
        "delay-deletion.cluster-autoscaler.kubernetes.io/lb-drain": "x"}))
    assert not has_delay_deletion(make_node("n", annotations={
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}))
    assert not has_delay_deletion(make_node("n"))


async def test_a_refused_eviction_is_retried_every_10s_for_2_minutes() -> None:
    """cluster-autoscaler core/scaledown/actuation/drain.go ``evictPod``: an eviction refused
    (a PodDisruptionBudget's 429) is tried again every EvictionRetryTime (10 s) until
    --max-pod-eviction-time (2 min, config/flags/flags.go) has passed, then fails; one that
    goes through on a later try succeeds."""
    clock = FakeClock()
    calls: list[float] = []

    async def refused() -> KubeError | None:
        calls.append(clock.now)
        return KubeError(429, "TooManyRequests", "Cannot evict pod as it would violate the "
                         "pod's disruption budget.")

    problem = await retry_until(refused, 120.0, 10.0, clock, clock.sleep)
    assert problem is not None and problem.status == 429
    assert calls == [10.0 * i for i in range(12)]  # 0 s .. 110 s, then the deadline

    clock, calls = FakeClock(), []

    async def third_time() -> KubeError | None:
        calls.append(clock.now)
        return None if len(calls) == 3 else KubeError(429, "TooManyRequests", "budget")

    assert await retry_until(third_time, 120.0, 10.0, clock, clock.sleep) is None
    assert calls == [0.0, 10.0, 20.0]


# The Actuator's waits against the API server's own answers (a real PodDisruptionBudget's
# 429, a real Node's annotations): tests/integration/autoscaler/test_autoscaler_actuation_waits.py
