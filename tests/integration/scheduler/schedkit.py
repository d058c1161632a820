"""Pods to create and API look-ups shared by the scheduler's integration tests (the pods are
built by tests/support/builders.py)."""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from tests.support import builders
from tests.support.builders import for_create

JSON = dict[str, Any]


def make_pod(name: str, scheduler: str, cpu: str = "100m", labels: dict[str, str] | None = None,
             **spec: Any) -> JSON:
    """The body to create: tests/support/builders.make_pod for ``scheduler``, requesting ``cpu``
    and 64Mi, ending at once when deleted; extra keywords are spec fields."""
    return for_create(builders.make_pod(
        name, cpu=cpu, memory="64Mi", labels=labels, scheduler_name=scheduler,
        image="registry.k8s.io/pause:3.10", spec={"terminationGracePeriodSeconds": 0, **spec}))


async def create_pod(kube: KubeClient, namespace: str, body: JSON) -> JSON:
    return await kube.create(resource_path(CORE, "pods", namespace), body)


async def get_pod(kube: KubeClient, namespace: str, name: str) -> JSON:
    return await kube.get(resource_path(CORE, "pods", namespace, name))


async def node_of(kube: KubeClient, namespace: str, name: str) -> str | None:
    try:
        pod = await get_pod(kube, namespace, name)
    except KubeError:
        return None
    return (pod.get("spec") or {}).get("nodeName") or None


async def events_for(kube: KubeClient, namespace: str, reason: str | None = None
                     ) -> list[JSON]:
    items, _ = await kube.list_all(resource_path(CORE, "events", namespace))
    return [e for e in items if reason is None or e.get("reason") == reason]
