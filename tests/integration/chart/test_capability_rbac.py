"""The operator's RBAC follows its capabilities (docs/security.md), asked of the real API server.

For each capability alone (``operator.capabilities={<one>}``), the chart's operator
ServiceAccount, ClusterRole and binding are applied to the local control plane and
``kubectl auth can-i --as=<account>`` is asked what that account may do: what the capability
needs, yes; what only the other capabilities need (Node create/delete, Machine writes, Jobs
and ConfigMaps in the operator's namespace), no; what none needs (RBAC writes, Jobs or
ConfigMaps elsewhere, deleting pods), no for all. Last, the chart is installed for real as a
subchart of an umbrella chart (Helm passes it ``global:``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import CRDS, SHARED_CRDS, helm, render, to_yaml
from tests.integration.chart.test_adoption import umbrella
from tests.integration.chart.test_on_the_api_server import can_i, kubectl_ok

CAPABILITIES = ("machines", "deschedulers", "autoscaler", "machinehealthchecks", "podgroups")
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

# (verb, resource[, flags]) -> the capabilities that must be allowed it; every other one must
# be refused. What all share (kopf's CRD watch, events) is allowed to all; reading and evicting
# pods to the three that move pods.
ALL = set(CAPABILITIES)
MOVERS = {"machines", "autoscaler"}
NODE_READERS = {"machines", "autoscaler", "machinehealthchecks"}
# {ns}: the operator's (release) namespace.
QUESTIONS: list[tuple[tuple[str, ...], set[str]]] = [
    (("watch", "customresourcedefinitions.apiextensions.k8s.io"), ALL),
    (("create", "events", "-A"), ALL),
    (("list", "pods", "-A"), MOVERS | {"podgroups"}),
    (("create", "pods", "--subresource=eviction", "-A"), MOVERS),
    (("list", "poddisruptionbudgets.policy", "-A"), MOVERS),
    (("create", "nodes"), {"machines"}),
    (("delete", "nodes"), {"machines"}),
    (("patch", "nodes"), {"machines", "autoscaler"}),
    (("update", "nodes"), set()),
    (("list", "nodes"), NODE_READERS),
    (("create", "machines.machine.openshift.io", "-A"), {"machines"}),
    (("delete", "machines.machine.openshift.io", "-A"), {"machines", "machinehealthchecks"}),
    (("list", "machinehealthchecks.machine.openshift.io", "-A"), {"machinehealthchecks"}),
    (("patch", "machinehealthchecks.machine.openshift.io", "--subresource=status", "-A"),
     {"machinehealthchecks"}),
    (("update", "machines.machine.openshift.io", "--subresource=status", "-A"), {"machines"}),
    # machinehealthchecks: metal3's external-baremetal strategy annotates the Machine
    (("patch", "machines.machine.openshift.io", "-A"),
     {"machines", "autoscaler", "machinehealthchecks"}),
    # ControllerNotFound: the autoscaler knows which workload controllers exist
    (("watch", "replicasets.apps", "-A"), {"autoscaler"}),
    (("list", "replicationcontrollers", "-A"), {"autoscaler"}),
    (("list", "jobs.batch", "-A"), {"autoscaler"}),
    (("patch", "machinesets.machine.openshift.io", "-A"), {"machines", "autoscaler"}),
    (("list", "machinesets.machine.openshift.io", "-A"), {"machines", "autoscaler"}),
    (("patch", "clusterautoscalers.autoscaling.openshift.io"), {"autoscaler"}),
    (("patch", "machineautoscalers.autoscaling.openshift.io", "-A"), {"autoscaler"}),
    (("list", "configmaps", "-n", "{ns}"), {"deschedulers", "autoscaler"}),
    (("create", "configmaps", "-n", "{ns}"), {"deschedulers"}),
    (("list", "configmaps", "-A"), set()),
    (("get", "configmaps", "-n", "kube-system"), set()),
    (("list", "priorityclasses.scheduling.k8s.io"), {"autoscaler"}),
    # the autoscaler's simulations' volume filters (scheduler/volume_objects.py); descheduler
    # Jobs get them from the chart's descheduler ClusterRole, not from the operator
    (("list", "persistentvolumeclaims", "-A"), {"autoscaler"}),
    (("watch", "persistentvolumes"), {"autoscaler"}),
    (("list", "storageclasses.storage.k8s.io"), {"autoscaler"}),
    (("list", "csinodes.storage.k8s.io"), {"autoscaler"}),
    (("watch", "csidrivers.storage.k8s.io"), {"autoscaler"}),
    (("list", "csistoragecapacities.storage.k8s.io", "-A"), {"autoscaler"}),
    (("patch", "deschedulers.berthmaster.io", "-A"), {"deschedulers"}),
    (("patch", "kubedeschedulers.operator.openshift.io", "-A"), {"deschedulers"}),
    (("patch", "kubedeschedulers.operator.openshift.io", "--subresource=status", "-A"),
     {"deschedulers"}),
    # the PodGroup controller's: read groups, write their status alone (the autoscaler reads)
    (("watch", "podgroups.scheduling.x-k8s.io", "-A"), {"podgroups", "autoscaler"}),
    (("patch", "podgroups.scheduling.x-k8s.io", "--subresource=status", "-A"), {"podgroups"}),
    (("patch", "podgroups.scheduling.x-k8s.io", "-A"), set()),
    (("create", "jobs.batch", "-n", "{ns}"), {"deschedulers"}),
    (("create", "cronjobs.batch", "-n", "{ns}"), {"deschedulers"}),
    (("create", "jobs.batch", "-A"), set()),
    (("create", "serviceaccounts", "-A"), set()),
    (("create", "clusterroles.rbac.authorization.k8s.io"), set()),
    (("create", "clusterrolebindings.rbac.authorization.k8s.io"), set()),
    (("delete", "pods", "-A"), set()),
    (("get", "secrets", "-A"), set()),
    (("create", "pods", "-A"), set()),
]


@pytest.fixture(scope="module")
def accounts(cluster: RunningCluster) -> Iterator[dict[str, tuple[str, str]]]:
    """capability -> (namespace, ServiceAccount) of an operator running that capability alone."""
    # can-i resolves resource names through discovery: the CRDs must be served.
    kubectl_ok(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    kubectl_ok(cluster, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    suffix = uuid.uuid4().hex[:5]
    found: dict[str, tuple[str, str]] = {}
    applied: list[str] = []
    try:
        for capability in CAPABILITIES:
            release = f"cap{CAPABILITIES.index(capability)}{suffix}"
            namespace = f"{release}-system"
            kubectl_ok(cluster, "create", "namespace", namespace)
            # metrics.serving=plain: the metrics endpoint's RBAC (metrics-auth-rbac.yaml) is
            # the same for every capability and tested in test_metrics_serving.py
            objects = [obj for obj in render(["scheduler.enabled=false",
                                              f"operator.capabilities={{{capability}}}",
                                              "metrics.serving=plain"],
                                             release=release, namespace=namespace)
                       if obj["kind"] in RBAC_KINDS]
            operator_role = [o for o in objects if o["kind"] in ("Role", "RoleBinding")]
            assert bool(operator_role) is (capability in ("deschedulers", "autoscaler"))
            manifest = to_yaml(objects)
            kubectl_ok(cluster, "apply", "-f", "-", input=manifest)
            applied.append(manifest)
            found[capability] = (namespace, f"{release}-berthmaster-operator")
        yield found
    finally:
        for manifest in applied:
            cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-",
                            input=manifest)
        for namespace, _ in found.values():
            cluster.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize(("question", "allowed"), QUESTIONS,
                         ids=[" ".join(q) for q, _ in QUESTIONS])
def test_each_capability_alone_gets_exactly_its_rights(
        cluster: RunningCluster, accounts: dict[str, tuple[str, str]], capability: str,
        question: tuple[str, ...], allowed: set[str]) -> None:
    namespace, account = accounts[capability]
    asked = [part.format(ns=namespace) for part in question]
    assert can_i(cluster, account, namespace, *asked) is (capability in allowed)


def test_installs_as_a_subchart_of_an_umbrella_chart(cluster: RunningCluster,
                                                    tmp_path: Path) -> None:
    release = f"umb{uuid.uuid4().hex[:5]}"
    namespace = f"{release}-system"
    chart = umbrella(tmp_path, {"global": {"imageRegistry": "registry.example.com"},
                                "berthmaster": {"scheduler": {"name": f"{release}-sched"}}})
    kubeconfig = str(cluster.kubeconfig)
    result = helm("install", release, str(chart), "--namespace", namespace,
                  "--create-namespace", "--kubeconfig", kubeconfig, *SHARED_CRDS)
    try:
        assert result.returncode == 0, result.stderr
        status = yaml.safe_load(helm("status", release, "--namespace", namespace,
                                     "--kubeconfig", kubeconfig, "-o", "yaml").stdout)
        assert status["info"]["status"] == "deployed"
        deployments = kubectl_ok(cluster, "get", "deployments", "-n", namespace, "-o", "name")
        assert sorted(deployments.split()) == [
            f"deployment.apps/{release}-berthmaster-operator",
            f"deployment.apps/{release}-berthmaster-scheduler"]
    finally:
        helm("uninstall", release, "--namespace", namespace, "--kubeconfig", kubeconfig,
             "--wait=false")
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
