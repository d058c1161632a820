"""The demo's dedicated-node story, with the placement admission webhook and nothing else.

The taints document says to dedicate nodes to a group by tainting them
(``dedicated=groupName:NoSchedule``) and "writing a custom admission controller" that adds the
toleration to the group's pods. With the webhook ``berthmaster admission`` serves
(docs/admission.md), the group's namespace only needs two annotations: its default tolerations
and its node selector. A pod written with neither comes back from the API server with both and
is placed on the dedicated node by the berthmaster scheduler. Everything printed is read back.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path

TEAM_NAMESPACE = "berthmaster-team"
DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "groupName",
             "effect": "NoSchedule"}
ANNOTATIONS = {"scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps([DEDICATED]),
               "scheduler.alpha.kubernetes.io/node-selector": "dedicated=groupName"}


async def _team_namespace(kube: KubeClient) -> None:
    path = resource_path(CORE, "namespaces", name=TEAM_NAMESPACE)
    try:
        await kube.patch(path, {"metadata": {"annotations": ANNOTATIONS}})
    except KubeError as error:
        if not error.not_found:
            raise
        await kube.create(resource_path(CORE, "namespaces"), {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": TEAM_NAMESPACE, "annotations": ANNOTATIONS}})


async def dedicated_story(kube: KubeClient, timeout: float = 60) -> list[str]:
    """Annotate the team's namespace, create a plain pod there, report what it became."""
    await _team_namespace(kube)
    pods = resource_path(CORE, "pods", TEAM_NAMESPACE)
    try:
        await kube.delete(resource_path(CORE, "pods", TEAM_NAMESPACE, "team-worker"),
                          gracePeriodSeconds=0)
    except KubeError as error:
        if not error.not_found:
            raise
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "team-worker"},
        "spec": {"schedulerName": "berthmaster", "automountServiceAccountToken": False,
                 "containers": [{"name": "app", "image": "registry.example/team:1"}]}}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:  # the previous run's pod may still be going away
        try:
            created = await kube.create(pods, body)
            break
        except KubeError as error:
            if not error.conflict or loop.time() > deadline:
                raise
            await asyncio.sleep(0.3)
    toleration = next((t for t in created["spec"].get("tolerations") or []
                       if t.get("key") == "dedicated"), None)
    node = ""
    while not node and loop.time() < deadline:
        node = (await kube.get(resource_path(CORE, "pods", TEAM_NAMESPACE, "team-worker"))
                )["spec"].get("nodeName") or ""
        if not node:
            await asyncio.sleep(0.3)
    selector = ",".join(f"{k}={v}" for k, v in
                        sorted((created["spec"].get("nodeSelector") or {}).items()))
    tolerated = (f"{toleration['key']}={toleration.get('value', '')}:{toleration['effect']}"
                 if toleration else "none")
    return [f"namespace {TEAM_NAMESPACE}: annotated with defaultTolerations "
            f"dedicated=groupName:NoSchedule and node-selector dedicated=groupName",
            f"pod team-worker written with no toleration and no selector -> admitted with "
            f"toleration {tolerated}, nodeSelector {selector or 'none'}",
            f"  -> placed on {node or '(not yet placed)'}"]
