"""Large objects on the watch, and an informer that fails: scheduling goes on.

One watch line carries one whole object, so a large pod is a line as large (aiohttp's line
reader stopped at 512 KiB). The API server takes request bodies of up to 3 MiB
(k8s.io/apiserver pkg/server/config.go ``MaxRequestBodyBytes``; one byte more is refused with
413, endpoints/handlers/rest.go ``limitedReadBody``), and stores what its etcd client may send
(2 MiB, etcd client/v3 ``options.go`` ``defaultMaxCallSendMsgSize``) and the dev cluster's
etcd takes (``--max-request-bytes``, raised from etcd's 1.5 MiB default). The pod here is a
body of exactly 3 MiB that is stored (berthmaster/tooling/chaos/bigpod.py: 1.6 MB of it plain text,
over etcd's default, the rest escaped characters); lines up to 16 MiB are the unit tests'
(tests/unit/foundation). The scheduler must read it, bind that pod, and keep binding the pods
after it. An informer that
fails in a way nothing expects is restarted (client-go tools/cache/reflector.go keeps
ListAndWatch running the same way), counted in ``berthmaster_informer_restarts_total``, and
``/readyz`` fails until it has listed again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError
from berthmaster.scheduler.daemon.trim import trim_pod
from berthmaster.tooling.chaos.bigpod import as_large_as, body_size
from berthmaster.tooling.devcluster.cluster import APISERVER_MAX_REQUEST_BODY_BYTES
from tests.integration.scheduler.schedkit import create_pod, get_pod, make_pod, node_of
from tests.support.waiting import http_get, wait_for

JSON = dict[str, Any]
LIMIT = APISERVER_MAX_REQUEST_BODY_BYTES  # 3 MiB


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def probe(port: int, path: str) -> tuple[int, str]:
    return await http_get(f"http://127.0.0.1:{port}{path}")


async def ready(port: int) -> bool:
    return (await probe(port, "/readyz"))[0] == 200


async def restarts(port: int) -> float:
    _, text = await probe(port, "/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('berthmaster_informer_restarts_total{resource="pods"}'))


async def bound_after(kube: KubeClient, namespace: str, name: str, since: float) -> float:
    await wait_for(lambda: node_of(kube, namespace, name), timeout=30,
                   what=f"{name} bound")
    return time.monotonic() - since


async def test_a_pod_of_3_mib_is_scheduled_and_so_are_the_pods_after_it(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    await nodes.create(capacity={"cpu": "8", "memory": "16Gi", "pods": "110"})
    port = free_port()
    sched = await run_scheduler.start(metrics_bind_address=f"127.0.0.1:{port}")
    await wait_for(lambda: ready(port), timeout=30, what="the scheduler ready")

    # One byte over the limit is refused: the pod below is as large as the API server takes.
    over = as_large_as(make_pod("over", sched.name), LIMIT + 1)
    try:
        await create_pod(kube, namespace, over)
    except KubeError as error:
        assert error.status == 413, error
    else:
        raise AssertionError("a body of 3 MiB + 1 byte was accepted")

    created = time.monotonic()
    body = as_large_as(make_pod("big", sched.name), LIMIT)
    assert body_size(body) == LIMIT
    big = await create_pod(kube, namespace, body)
    assert big["spec"]["containers"][0]["env"] == body["spec"]["containers"][0]["env"]
    after = time.monotonic()
    smalls = [f"small-{i}" for i in range(3)]
    for name in smalls:
        await create_pod(kube, namespace, make_pod(name, sched.name))
    waits = await asyncio.gather(bound_after(kube, namespace, "big", created),
                                 *(bound_after(kube, namespace, name, after) for name in smalls))
    print(f"bound after: big {waits[0]:.2f} s, the small pods after it "
          f"{', '.join(f'{w:.2f}' for w in waits[1:])} s")

    assert await ready(port)
    assert await restarts(port) == 0.0  # read as any other line: nothing failed, nothing restarted
    # Every request says who sends it: the API server names the field manager of the
    # scheduler's writes after the User-Agent (berthmaster-scheduler/<version> (os/arch)).
    unschedulable = make_pod("too-big", sched.name, cpu="64")
    await create_pod(kube, namespace, unschedulable)

    async def managers() -> set[str] | None:
        pod = await get_pod(kube, namespace, "too-big")
        found = {entry.get("manager", "") for entry in pod["metadata"].get("managedFields", [])}
        return found if "berthmaster-scheduler" in found else None

    await wait_for(managers, timeout=30, what="too-big's status written by berthmaster-scheduler")


async def test_an_informer_that_fails_is_restarted_and_readiness_follows(
    kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any
) -> None:
    await nodes.create(capacity={"cpu": "8", "memory": "16Gi", "pods": "110"})
    port = free_port()
    sched = await run_scheduler.start(metrics_bind_address=f"127.0.0.1:{port}")
    await wait_for(lambda: ready(port), timeout=30, what="the scheduler ready")
    (informer,) = [i for i in sched.service.cache.informers if i.resource.kind == "Pod"]
    failing = asyncio.Event()
    failing.set()

    def transform(pod: JSON) -> JSON:
        # An exception no informer expects, for one pod, while the test wants it: on the
        # watch event and on every relist after the restart.
        if failing.is_set() and (pod.get("metadata") or {}).get("name") == "boom":
            raise RuntimeError("boom")
        return trim_pod(pod)

    informer.resource = dataclasses.replace(informer.resource, transform=transform)
    await create_pod(kube, namespace, make_pod("boom", sched.name))

    async def not_ready() -> str | None:
        status, text = await probe(port, "/readyz")
        return text if status == 500 else None

    reason = await wait_for(not_ready, timeout=30, what="/readyz failing after the restart")
    assert reason == "caches not synced: pods"
    assert await restarts(port) >= 1.0
    assert not sched.task.done()  # the scheduler goes on; only the informer restarted

    failing.clear()
    since = time.monotonic()
    await wait_for(lambda: ready(port), timeout=60, what="/readyz back once the pods relisted")
    print(f"ready again {time.monotonic() - since:.2f} s after the failure stopped")
    assert informer.relists >= 1
    # What happened while the informer was down is in its new list: both pods are scheduled.
    await create_pod(kube, namespace, make_pod("after", sched.name))
    for name in ("boom", "after"):
        await wait_for(lambda name=name: node_of(kube, namespace, name), timeout=30,
                       what=f"{name} bound")
