"""Scheduler routing on the real API server: ``berthmaster admission --scheduler-name NAME``
registers its second mutating webhook, and

- a pod that sets no schedulerName in a namespace labelled ``berthmaster.io/scheduler=NAME``
  is created with ``schedulerName: NAME`` and bound by berthmaster's scheduler of that name
  (its Scheduled event comes from NAME);
- a pod there that chose a scheduler keeps it, one labelled
  ``berthmaster.io/scheduler=default-scheduler`` keeps kube-scheduler, and pods of an
  unlabelled namespace keep ``default-scheduler``;
- the API server itself filters: the webhook's ``/scheduler-name`` counter moves only for the
  routed pods (its namespaceSelector, objectSelector and matchConditions,
  k8s.io/apiserver/pkg/admission/plugin/webhook/predicates and .../matchconditions).

Pods arrive at the webhook with ``default-scheduler`` already set by the API server's defaulting
(k8s.io/apiserver/pkg/endpoints/handlers/create.go decodes with a defaulting codec, before
mutating admission; kubernetes pkg/apis/core/v1/defaults.go ``SetDefaults_PodSpec``): the
unrouted pods' schedulerName below shows it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from berthmaster.foundation.kube import CORE, KubeClient, resource_path
from berthmaster.operator.admission.schedulername import LABEL
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.admission.conftest import AdmissionProcess, create_pod, free_port, pod_body
from tests.integration.conftest import NodeFactory
from tests.integration.scheduler.conftest import RunningScheduler, SchedulerRunner
from tests.integration.scheduler.schedkit import events_for, node_of
from tests.support.waiting import wait_for

SCHEDULER = f"bm-route-{uuid.uuid4().hex[:6]}"
METRICS_PORT = free_port()
ADMISSION_ARGS = ("--scheduler-name", SCHEDULER, "--metrics-bind-address",
                  f"127.0.0.1:{METRICS_PORT}")


@pytest.fixture
async def scheduler(cluster: RunningCluster) -> AsyncIterator[RunningScheduler]:
    runner = SchedulerRunner(str(cluster.kubeconfig))
    runner.name = SCHEDULER
    try:
        yield await runner.start()
    finally:
        await runner.stop_all()


async def label(kube: KubeClient, namespace: str, value: str) -> None:
    await kube.patch(resource_path(CORE, "namespaces", name=namespace),
                     {"metadata": {"labels": {LABEL: value}}}, kind="merge")


async def routed_reviews() -> float:
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{METRICS_PORT}/metrics") as response:
        text = await response.text()
    return sum(float(line.split()[1]) for line in text.splitlines()
               if line.startswith("berthmaster_admission_requests_total{")
               and 'path="/scheduler-name"' in line)


def scheduler_name(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("schedulerName"))


async def test_a_labelled_namespace_is_routed_and_scheduled_by_berthmaster(
        admission: AdmissionProcess, kube: KubeClient, namespace: str, nodes: NodeFactory,
        scheduler: RunningScheduler) -> None:
    node = await nodes.create()
    await label(kube, namespace, SCHEDULER)
    before = await routed_reviews()

    created = await create_pod(kube, namespace, pod_body("web"), dry_run=False)
    assert scheduler_name(created) == SCHEDULER
    assert await routed_reviews() == before + 1

    bound = await wait_for(lambda: node_of(kube, namespace, "web"), timeout=60,
                           what="berthmaster binding the routed pod")
    assert bound == node["metadata"]["name"]
    # the event is recorded after the binding, by the scheduler's event broadcaster
    (event,) = await wait_for(lambda: events_for(kube, namespace, "Scheduled"), timeout=30,
                              what="the Scheduled event")
    assert (event["source"]["component"], event["reportingComponent"]) == (SCHEDULER,
                                                                            SCHEDULER)


async def test_pods_that_chose_and_unlabelled_namespaces_are_untouched(
        admission: AdmissionProcess, kube: KubeClient, namespace: str, project: Any) -> None:
    await label(kube, namespace, SCHEDULER)
    unlabelled = await project()
    other_release = await project()
    await label(kube, other_release, "another-berthmaster")
    before = await routed_reviews()

    chose = await create_pod(kube, namespace, pod_body("chose", schedulerName="my-scheduler"))
    kept = await create_pod(kube, namespace, {
        **pod_body("kept"), "metadata": {"name": "kept",
                                         "labels": {LABEL: "default-scheduler"}}})
    elsewhere = await create_pod(kube, unlabelled, pod_body("elsewhere"))
    other = await create_pod(kube, other_release, pod_body("other"))

    assert scheduler_name(chose) == "my-scheduler"
    assert [scheduler_name(p) for p in (kept, elsewhere, other)] == ["default-scheduler"] * 3
    # The API server sent none of them to the routing webhook.
    assert await routed_reviews() == before

    # The same pod in the labelled namespace is routed (and reviewed once).
    routed = await create_pod(kube, namespace, pod_body("routed"))
    assert scheduler_name(routed) == SCHEDULER
    assert await routed_reviews() == before + 1
