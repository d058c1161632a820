"""The autoscaler's pod informer (operator/autoscaler/watches.py) on the real API server: a pod
whose JSON is 3 MiB, the API server's request limit to the byte (berthmaster/tooling/chaos/bigpod.py
says what of it is stored and why), is read like any other, and an informer that fails in a
way nothing expects is restarted (as client-go tools/cache/reflector.go keeps ListAndWatch
running), counted in
``berthmaster_informer_restarts_total{resource="pods"}``, and the operator's ``/readyz``
condition fails until the informer has listed again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.operator import health
from berthmaster.operator.autoscaler import handlers
from berthmaster.operator.autoscaler.loop import ACTIVE_PODS
from berthmaster.operator.autoscaler.watches import WatchedCluster
from berthmaster.scheduler.daemon.cache import Resource
from berthmaster.tooling.chaos.bigpod import as_large_as, body_size
from berthmaster.tooling.devcluster.cluster import APISERVER_MAX_REQUEST_BODY_BYTES
from tests.support.builders import for_create, make_pod
from tests.support.waiting import wait_for

JSON = dict[str, Any]


def pod(name: str) -> JSON:
    return for_create(make_pod(name, cpu="10m", memory="16Mi", scheduler_name="nobody",
                               image="registry.k8s.io/pause:3.10"))


def restarts() -> float:
    return REGISTRY.get_sample_value("berthmaster_informer_restarts_total",
                                     {"resource": "pods"}) or 0.0


@pytest.fixture
async def watched(kube: KubeClient) -> AsyncIterator[WatchedCluster]:
    """The operator's WatchedCluster in the autoscaler's runtime, seen by /readyz as the
    capability's startup handler installs it (operator/capability.py)."""
    runtime = handlers.AutoscalerRuntime(WatchedCluster(kube, sync_timeout=30))
    health.set_check(handlers.CAPABILITY, runtime.ready)
    try:
        yield runtime.cluster
    finally:
        health.set_check(handlers.CAPABILITY, lambda: (True, "ok"))
        await runtime.stop()


def operator_readiness() -> tuple[bool, str]:
    readiness = health.Readiness()  # kopf started and the API server answered: only the caches
    readiness.started.set()
    readiness.api_problem = None
    return readiness()


async def test_the_pod_informer_reads_large_pods_and_restarts_after_a_failure(
    kube: KubeClient, namespace: str, watched: WatchedCluster
) -> None:
    failing = asyncio.Event()

    def transform(obj: JSON) -> JSON:
        if failing.is_set() and obj["metadata"]["name"] == "boom":
            raise RuntimeError("boom")
        return obj

    pods = Resource("Pod", resource_path(CORE, "pods", namespace), field_selector=ACTIVE_PODS,
                    transform=transform)
    assert await watched.items(pods) == []
    path = resource_path(CORE, "pods", namespace)

    # A pod of 3 MiB arrives on the watch as one line and is cached like any other.
    big = as_large_as(pod("big"))
    assert body_size(big) == APISERVER_MAX_REQUEST_BODY_BYTES
    await kube.create(path, big)

    async def cached(name: str) -> bool:
        return any(p["metadata"]["name"] == name for p in await watched.items(pods))

    await wait_for(lambda: cached("big"), timeout=30, what="the 3 MiB pod in the cache")
    before = restarts()
    assert before == 0.0
    assert operator_readiness() == (True, "ok")

    failing.set()
    await kube.create(path, pod("boom"))

    def not_ready() -> str | None:
        ok, reason = operator_readiness()
        return None if ok else reason

    reason = await wait_for(not_ready, timeout=30, what="/readyz failing after the restart")
    assert reason == "the autoscaler's pods informer restarted and has not listed again"
    assert restarts() >= before + 1

    failing.clear()
    await wait_for(lambda: operator_readiness()[0], timeout=60,
                   what="/readyz back once the pods relisted")
    assert await cached("boom") and await cached("big")
