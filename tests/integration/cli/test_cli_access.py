"""Missing CRDs or RBAC end a command at startup with one line naming what is missing and the
fix, exit 2, on the real API server.

RBAC: the commands run with a kubeconfig holding a TokenRequest token of a fresh ServiceAccount
that is granted nothing (or only part of what is needed); the API server answers their
SelfSubjectAccessReviews. Missing CRDs: a second, bare control plane (no kwok) on which no
berthmaster CRD was ever installed. Before this change the scheduler started and logged 403s
for ever, and the operator waited for its CRDs (kopf) or its 403s retried: neither exited, so
every test here timed out.

Upstream: kube-scheduler needs what the ``system:kube-scheduler`` ClusterRole grants
(plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go ``ClusterRoles``); kopf watches
CustomResourceDefinitions and posts events (kopf/_core/reactor/observation.py,
kopf/_core/engines/posting.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient
from berthmaster.tooling.devcluster.cluster import ControlPlane, Options, RunningCluster
from tests.integration.cli.test_cli_failures import CONNECTING, berthmaster, one_line
from tests.support.accounts import account_kubeconfig, granted

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
CRD_FIX = ("install the CRDs (kubectl apply -f deploy/crds/, or the Helm chart) or leave the "
           "capability out (--only NAME runs just the ones named)")
OPERATOR_RBAC_FIX = ("grant the operator's ClusterRole and Role (the Helm chart's templates/"
                     "operator-rbac.yaml or deploy/manifests/) to this account, or leave the "
                     "capability out (--only NAME)")
SCHEDULER_RBAC_FIX = ("grant the scheduler's ClusterRole and lease Role (the Helm chart's "
                      "templates/scheduler-rbac.yaml or deploy/manifests/) to this account, or "
                      "bind it to system:kube-scheduler")


async def test_scheduler_without_rbac(kube: KubeClient, cluster: RunningCluster,
                                      namespace: str, tmp_path: Path) -> None:
    path = await account_kubeconfig(kube, cluster, namespace, tmp_path)
    result = berthmaster(*CONNECTING["scheduler"], "--kubeconfig", str(path))
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster scheduler: the user system:serviceaccount:{namespace}:bare may not "
        "list pods (scheduling), watch pods (scheduling), list nodes (scheduling), watch nodes "
        "(scheduling), create pods/binding (scheduling), patch pods/status (scheduling), "
        f"create events (scheduling); {SCHEDULER_RBAC_FIX}")


async def test_scheduler_with_part_of_its_rbac_names_only_the_rest(
        kube: KubeClient, cluster: RunningCluster, namespace: str, tmp_path: Path) -> None:
    path = await account_kubeconfig(kube, cluster, namespace, tmp_path)
    rules = [{"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list", "watch"]},
             {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    async with granted(kube, namespace, "bare", rules):
        # leader election on: the Lease in kube-system is needed too
        result = berthmaster("scheduler", "--metrics-bind-address=", "--kubeconfig", str(path))
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster scheduler: the user system:serviceaccount:{namespace}:bare may not "
        "create pods/binding (scheduling), patch pods/status (scheduling), get "
        "leases.coordination.k8s.io berthmaster in namespace kube-system (leader election), "
        "update leases.coordination.k8s.io berthmaster in namespace kube-system (leader "
        f"election); {SCHEDULER_RBAC_FIX}")


async def test_operator_without_rbac(kube: KubeClient, cluster: Any, namespace: str,
                                     tmp_path: Path) -> None:
    applied = cluster.kubectl("apply", "-f", str(DEPLOY / "crds/berthmaster.io_deschedulers.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                           "crd/deschedulers.berthmaster.io").returncode == 0
    path = await account_kubeconfig(kube, cluster, namespace, tmp_path)
    result = berthmaster(*CONNECTING["operator"], "--only", "deschedulers",
                         "--kubeconfig", str(path))
    assert result.returncode == 2
    assert one_line(result) == (
        f"berthmaster operator: the user system:serviceaccount:{namespace}:bare may not "
        "list customresourcedefinitions.apiextensions.k8s.io (kopf), watch "
        "customresourcedefinitions.apiextensions.k8s.io (kopf), create events (kopf), "
        "list deschedulers.berthmaster.io (deschedulers), watch deschedulers.berthmaster.io "
        "(deschedulers), patch deschedulers/status.berthmaster.io (deschedulers), create "
        "jobs.batch in namespace berthmaster (deschedulers), list jobs.batch in namespace "
        "berthmaster (deschedulers), create cronjobs.batch in namespace berthmaster "
        "(deschedulers), create configmaps in namespace berthmaster (deschedulers); "
        f"{OPERATOR_RBAC_FIX}")


@pytest.fixture(scope="module")
def bare_cluster() -> Iterator[RunningCluster]:
    """A control plane of its own, on which no berthmaster CRD was ever installed."""
    plane = ControlPlane(f"pytest-bare-{os.getpid()}", options=Options(kwok="none"),
                         say=lambda line: print(line, flush=True))
    running = plane.up()
    try:
        yield running
    finally:
        plane.down(quiet=True)


def test_operator_capability_without_its_crds(bare_cluster: RunningCluster) -> None:
    result = berthmaster(*CONNECTING["operator"], "--only", "machines",
                         "--kubeconfig", str(bare_cluster.kubeconfig))
    assert result.returncode == 2
    assert one_line(result) == (
        "berthmaster operator: the API server does not serve what is needed: the custom "
        "resources are missing: machines.machine.openshift.io/v1beta1 (machines), "
        f"machinesets.machine.openshift.io/v1beta1 (machines); {CRD_FIX}")


def test_operator_with_no_crd_at_all(bare_cluster: RunningCluster) -> None:
    """Without --only each capability waits for its CRDs (a warning each); with none of them
    installed nothing could run, so the command ends as with --only."""
    result = berthmaster(*CONNECTING["operator"], "--kubeconfig", str(bare_cluster.kubeconfig))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("berthmaster operator: the API server does not serve what is "
                           "needed: the custom resources are missing: "
                           "machines.machine.openshift.io/v1beta1 (machines), ")
    assert "deschedulers.berthmaster.io/v1alpha1 (deschedulers)" in line
    assert "clusterautoscalers.autoscaling.openshift.io/v1 (autoscaler)" in line
    assert "podgroups.scheduling.x-k8s.io/v1alpha1 (podgroups)" in line
    assert line.endswith(CRD_FIX)
    # machines, machinehealthchecks, deschedulers, autoscaler, podgroups
    assert result.stderr.count("waits for its custom resources") == 5
