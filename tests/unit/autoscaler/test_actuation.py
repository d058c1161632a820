"""Removing a chosen node (cluster-autoscaler core/scaledown/actuation), on a fake clock: which
DaemonSet pods go, how long a refused eviction is retried, the delay-deletion wait."""

from __future__ import annotations

from typing import Any

from berthmaster.kube import KubeError
from berthmaster.operator.autoscaler.actuation import (
    daemonset_pods_to_evict,
    has_delay_deletion,
    retry_until,
)
from berthmaster.operator.autoscaler.loop import Actuator
from tests.unit.autoscaler.builders import make_node, make_pod

JSON = dict[str, Any]
OPT = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


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


class RefusingKube:
    """Answers ``refusals`` eviction POSTs with 429, then accepts; GETs return ``nodes``."""

    def __init__(self, refusals: int, nodes: list[JSON] | None = None) -> None:
        self.refusals = refusals
        self.posts = 0
        self.nodes = nodes or []

    async def create(self, path: str, body: JSON) -> JSON:
        self.posts += 1
        if self.posts <= self.refusals:
            raise KubeError(429, "TooManyRequests", "would violate the disruption budget")
        return body

    async def get(self, path: str) -> JSON:
        return self.nodes.pop(0) if len(self.nodes) > 1 else self.nodes[0]


def actuator(kube: Any, clock: FakeClock) -> Actuator:
    act = Actuator(kube, now=1_700_000_000.0, clock=0.0)
    act.monotonic = clock
    act.sleep = clock.sleep
    return act


async def test_the_actuator_retries_a_pdb_refusal_until_its_deadline() -> None:
    """cluster-autoscaler core/scaledown/actuation/drain.go ``initiateEviction``/``evictPod``:
    a 429 does not fail the node's removal at once."""
    clock = FakeClock()
    pod = make_pod("p", node="n")
    kube = RefusingKube(refusals=2)
    assert await actuator(kube, clock).evict_retrying(pod, 30, deadline=120.0) is None
    assert kube.posts == 3 and clock.now == 20.0
    clock = FakeClock()
    kube = RefusingKube(refusals=100)
    refused = await actuator(kube, clock).evict_retrying(pod, 30, deadline=120.0)
    assert refused is not None and refused.too_many_requests and kube.posts == 12


async def test_the_node_waits_for_delay_deletion_annotations_at_most_2_minutes() -> None:
    """cluster-autoscaler core/scaledown/actuation/delay.go ``WaitForDelayDeletion``: polled
    every 5 s until no delay-deletion annotation is left, or --node-deletion-delay-timeout
    (2 min) passes, after which the node is deleted anyway."""
    held = make_node("n", annotations={
        "delay-deletion.cluster-autoscaler.kubernetes.io/lb": "draining"})
    clear = make_node("n")
    clock = FakeClock()
    assert await actuator(RefusingKube(0, [held, held, clear]), clock) \
        .wait_for_delay_deletion("n") is True
    assert clock.now == 10.0
    clock = FakeClock()
    assert await actuator(RefusingKube(0, [held]), clock).wait_for_delay_deletion("n") is False
    assert clock.now == 120.0
