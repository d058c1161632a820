"""What each operator capability needs from the cluster, checked once before kopf starts.

Design: a table, :func:`capability_needs`, of the custom resources each capability watches and
the verbs it cannot work without (a subset of the chart's ClusterRole, templates/
operator-rbac.yaml: reading its resources, writing their status, and the one write that is its
job — an eviction, a Job, a MachineSet's replicas), plus what kopf itself needs. The command
hands the table to :func:`berthmaster.foundation.access.check`, which turns what is missing into
one line
and exit 2. Without ``--only`` (every capability), a capability whose custom resources are not
installed is reported with a warning and left waiting for them (kopf starts watching a CRD when
it appears), as before, unless no capability at all could run; asked for by ``--only``, it is
an error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from berthmaster.foundation.access import Access, Needs, Resource, check, crd_line, find_missing
from berthmaster.foundation.errors import ConfigurationError
from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.deschedulers.runs import RunSettings

log = logging.getLogger("berthmaster.operator")

MACHINE_API = "machine.openshift.io"
AUTOSCALING = "autoscaling.openshift.io"
BERTHMASTER = "berthmaster.io"
GANGS = "scheduling.x-k8s.io"

CRD_FIX = ("install the CRDs (kubectl apply -f deploy/crds/, or the Helm chart) or leave the "
           "capability out (--only NAME runs just the ones named)")
RBAC_FIX = ("grant the operator's ClusterRole and Role (the Helm chart's "
            "templates/operator-rbac.yaml or deploy/manifests/) to this account, or leave the "
            "capability out (--only NAME)")


def capability_needs(name: str, namespace: str | None = None) -> Needs:
    """What capability ``name`` needs; namespaced verbs are checked in ``namespace`` when the
    operator watches only that one."""
    ns = namespace
    if name == "machines":
        return Needs(name, (Resource(MACHINE_API, "v1beta1", "machines"),
                            Resource(MACHINE_API, "v1beta1", "machinesets")), (
            Access("list", "machines", MACHINE_API, ns),
            Access("watch", "machines", MACHINE_API, ns),
            Access("patch", "machines/status", MACHINE_API, ns),
            Access("list", "machinesets", MACHINE_API, ns),
            Access("create", "machines", MACHINE_API, ns),
            Access("list", "nodes"),
            Access("patch", "nodes"),
            Access("create", "pods/eviction", "", ns)))
    if name == "machinehealthchecks":
        return Needs(name, (Resource(MACHINE_API, "v1beta1", "machinehealthchecks"),
                            Resource(MACHINE_API, "v1beta1", "machines")), (
            Access("list", "machinehealthchecks", MACHINE_API, ns),
            Access("watch", "machinehealthchecks", MACHINE_API, ns),
            Access("patch", "machinehealthchecks/status", MACHINE_API, ns),
            Access("delete", "machines", MACHINE_API, ns),
            Access("list", "nodes")))
    if name == "deschedulers":
        # The runs are written in the operator's own namespace only (the chart's Role there).
        own = RunSettings.from_environment().namespace
        return Needs(name, (Resource(BERTHMASTER, "v1alpha1", "deschedulers"),), (
            Access("list", "deschedulers", BERTHMASTER, ns),
            Access("watch", "deschedulers", BERTHMASTER, ns),
            Access("patch", "deschedulers/status", BERTHMASTER, ns),
            Access("create", "jobs", "batch", own),
            Access("list", "jobs", "batch", own),
            Access("create", "cronjobs", "batch", own),
            Access("create", "configmaps", "", own)))
    if name == "autoscaler":
        return Needs(name, (Resource(AUTOSCALING, "v1", "clusterautoscalers"),
                            Resource(AUTOSCALING, "v1beta1", "machineautoscalers"),
                            Resource(MACHINE_API, "v1beta1", "machinesets")), (
            Access("list", "clusterautoscalers", AUTOSCALING),
            Access("watch", "clusterautoscalers", AUTOSCALING),
            Access("patch", "clusterautoscalers/status", AUTOSCALING),
            Access("list", "machineautoscalers", AUTOSCALING, ns),
            Access("patch", "machinesets", MACHINE_API, ns),
            Access("update", "machinesets/scale", MACHINE_API, ns),
            Access("list", "nodes"),
            Access("patch", "nodes"),
            Access("list", "pods")))
    if name == "podgroups":
        return Needs(name, (Resource(GANGS, "v1alpha1", "podgroups"),), (
            Access("list", "podgroups", GANGS, ns),
            Access("watch", "podgroups", GANGS, ns),
            Access("patch", "podgroups/status", GANGS, ns),
            Access("list", "pods", "", ns),
            Access("watch", "pods", "", ns)))
    raise ValueError(f"unknown capability {name!r}")


def kopf_needs(namespace: str | None = None) -> Needs:
    """kopf's own: notice CRDs, post events on the objects it handles."""
    return Needs("kopf", (), (
        Access("list", "customresourcedefinitions", "apiextensions.k8s.io"),
        Access("watch", "customresourcedefinitions", "apiextensions.k8s.io"),
        Access("create", "events", "", namespace)))


async def preflight_capabilities(kube: KubeClient, capabilities: Sequence[str],
                                 explicit: bool, namespaces: Sequence[str] = ()) -> None:
    """Raise a one-line ConfigurationError for what the capabilities miss (see the module)."""
    watched: Sequence[str | None] = list(namespaces) or [None]
    needs = [kopf_needs(ns) for ns in watched]
    capability = [capability_needs(name, ns) for name in capabilities for ns in watched]
    if not explicit:
        missing = await find_missing(kube, capability)
        waiting = dict.fromkeys(name for name, _ in missing.resources)
        for name in waiting:
            resources = ", ".join(str(r) for n, r in missing.resources if n == name)
            log.warning("the %s capability waits for its custom resources (%s): install the "
                        "CRDs (kubectl apply -f deploy/crds/) to use it", name, resources,
                        extra={"capability": name})
        capability = [n for n in capability if n.name not in waiting]
        if not capability:  # nothing could run: the same one line as an explicit --only
            raise ConfigurationError(crd_line(missing.resources, CRD_FIX))
        # its verbs still matter once its CRDs appear: checked for every capability
        needs += [Needs(n.name, (), n.access)
                  for n in (capability_needs(name, ns) for name in waiting for ns in watched)]
    await check(kube, needs + capability, CRD_FIX, RBAC_FIX)
