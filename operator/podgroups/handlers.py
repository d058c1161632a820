"""kopf handlers keeping scheduler-plugins' PodGroups' status (``scheduling.x-k8s.io/
v1alpha1``): the ``podgroups`` capability.

Design: any event on a PodGroup, or on a pod carrying the label
``scheduling.x-k8s.io/pod-group``, reconciles that group (podgroup_controller.go watches the
same two): read the PodGroup, list its pods (its namespace, that label), let the pure
:func:`~.status.settle` decide the status, and patch ``status`` only when it differs. Nothing
else is written, so a restart or a repeated event changes nothing. The scheduler's Coscheduling
plugin never reads this status; it is for people and tools.
The API client is the operator's shared one (operator/client.py).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from berthmaster.foundation.keys import object_key
from berthmaster.foundation.kube import CORE, KubeError, group_path, resource_path
from berthmaster.operator.client import operator_client as kube
from berthmaster.operator.podgroups.status import settle
from berthmaster.scheduler.plugins.coscheduling import POD_GROUP, POD_GROUP_LABEL

log = logging.getLogger("berthmaster.operator.podgroups")

GROUP, VERSION, PLURAL = POD_GROUP.group, POD_GROUP.version, POD_GROUP.plural


async def reconcile(namespace: str, name: str) -> None:
    client = await kube()
    path = resource_path(group_path(GROUP, VERSION), PLURAL, namespace, name)
    try:
        group = await client.get(path)
    except KubeError as error:
        if error.not_found:
            return
        raise
    pods, _ = await client.list_all(resource_path(CORE, "pods", namespace),
                                    labelSelector=f"{POD_GROUP_LABEL}={name}")
    status = settle(group, pods)
    if status != (group.get("status") or {}):
        await client.patch(f"{path}/status", {"status": status})
        log.info("podgroup status", extra={"podgroup": object_key(namespace, name),
                                           "phase": status.get("phase")})


@kopf.on.event(GROUP, VERSION, PLURAL)
async def podgroup_event(type: str | None, namespace: str | None, name: str | None,
                         **_: Any) -> None:
    if type == "DELETED" or not namespace or not name:
        return
    await reconcile(namespace, name)


@kopf.on.event("", "v1", "pods", labels={POD_GROUP_LABEL: kopf.PRESENT})
async def member_event(labels: kopf.Labels, namespace: str | None, **_: Any) -> None:
    name = labels.get(POD_GROUP_LABEL)
    if namespace and name:
        await reconcile(namespace, name)
