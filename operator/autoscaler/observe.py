"""The loop's first step, observe: read everything the decisions need from the API server.

Design: one LIST per kind (:func:`read_cluster`) when the operator's watch caches
(:mod:`.watches`) are not given; the PodGroups only when their CRD is served
(:func:`list_pod_groups`). Upstream reads its listers at the top of
cluster-autoscaler/core/static_autoscaler.go ``RunOnce`` the same way. Nothing here decides.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.operator.autoscaler.config import DEFAULT_NAMESPACE, AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import CONTROLLER_KINDS, controllers_of
from berthmaster.operator.autoscaler.expanders import PRIORITY_CONFIGMAP
from berthmaster.operator.autoscaler.state import JSON, ClusterState
from berthmaster.scheduler.volume_objects import list_volume_objects

MACHINE_API = group_path("machine.openshift.io", "v1beta1")
POLICY_API = group_path("policy", "v1")
SCHEDULING_API = group_path("scheduling.k8s.io", "v1")
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # terminal pods need no room

POD_GROUPS_API = group_path("scheduling.x-k8s.io", "v1alpha1")


async def list_pod_groups(kube: KubeClient) -> list[JSON] | None:
    """Every PodGroup; None when the API server does not serve them (their CRD is optional)."""
    try:
        groups, _ = await kube.list_all(resource_path(POD_GROUPS_API, "podgroups"))
    except KubeError as error:
        if error.not_found:
            return None
        raise
    return groups


async def read_cluster(kube: KubeClient, config: AutoscalerConfig,
                       namespace: str = DEFAULT_NAMESPACE) -> ClusterState:
    """One LIST per kind; the Priority expander's ConfigMap from ``namespace`` only."""
    nodes, _ = await kube.list_all(resource_path(CORE, "nodes"))
    pods, _ = await kube.list_all(resource_path(CORE, "pods"), fieldSelector=ACTIVE_PODS)
    pdbs, _ = await kube.list_all(resource_path(POLICY_API, "poddisruptionbudgets"))
    classes, _ = await kube.list_all(resource_path(SCHEDULING_API, "priorityclasses"))
    machine_sets, _ = await kube.list_all(resource_path(MACHINE_API, "machinesets"))
    machines, _ = await kube.list_all(resource_path(MACHINE_API, "machines"))
    configmap = None
    if "Priority" in config.expanders:
        configmap = await kube.get_if_exists(resource_path(CORE, "configmaps", namespace,
                                                           PRIORITY_CONFIGMAP))
    controllers = {}
    for kind, (api_path, plural) in CONTROLLER_KINDS.items():
        controllers[kind], _ = await kube.list_all(resource_path(api_path, plural))
    return ClusterState(nodes, pods, pdbs, {c["metadata"]["name"]: c for c in classes},
                        machine_sets, machines, configmap, await list_volume_objects(kube),
                        controllers_of(controllers), await list_pod_groups(kube) or [])


ClusterReader = Callable[[AutoscalerConfig], Awaitable[ClusterState]]

