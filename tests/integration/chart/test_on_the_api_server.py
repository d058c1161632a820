"""The chart, proven on the real API server of the local control plane.

- Every rendered object of every value set passes ``kubectl apply --dry-run=server``: the API
  server runs defaulting, schema validation and admission (Pod Security ``restricted`` enforced
  on the namespace) on each one. The ServiceMonitor and the PrometheusRule are the exceptions:
  their CRDs belong to the Prometheus Operator, which this control plane does not run, so the
  server answers "no matches for kind". The test checks that this is indeed the reason, and the
  render tests check their shape instead.
- The pods the Deployments would create are dry-run as Pods in that namespace, so Pod Security
  admission *enforces* the restricted profile on them (for Deployments it only warns).
- The plain manifests in deploy/manifests/ are applied the way their header tells users to.
- ``helm install`` for real, then the RBAC is asked what it allows (``kubectl auth can-i`` as
  each ServiceAccount) and the operator's one ``bind`` is exercised by impersonation.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import (
    CHART,
    CRDS,
    MANIFESTS,
    VALUE_SETS,
    find,
    helm,
    pod_templates,
    render,
    to_yaml,
)

PROMETHEUS_OPERATOR_KINDS = ("ServiceMonitor", "PrometheusRule")


def kubectl_ok(cluster: RunningCluster, *args: str, input: str | None = None) -> str:
    result = cluster.kubectl(*args, input=input)
    assert result.returncode == 0, f"kubectl {' '.join(args)}:\n{result.stderr}"
    return result.stdout


@pytest.fixture
def restricted_namespace(cluster: RunningCluster) -> Iterator[str]:
    name = f"chart-{uuid.uuid4().hex[:6]}"
    kubectl_ok(cluster, "create", "namespace", name)
    kubectl_ok(cluster, "label", "namespace", name,
               "pod-security.kubernetes.io/enforce=restricted",
               "pod-security.kubernetes.io/warn=restricted")
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false")


def dry_run(cluster: RunningCluster, objects: Sequence[Mapping[str, Any]]
            ) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=to_yaml(objects))


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_server_side_dry_run_accepts_every_object(
    cluster: RunningCluster, restricted_namespace: str, value_set: str
) -> None:
    release = f"r{uuid.uuid4().hex[:6]}"
    objects = render(VALUE_SETS[value_set], release=release, namespace=restricted_namespace)
    others = [obj for obj in objects if obj["kind"] not in PROMETHEUS_OPERATOR_KINDS]
    result = dry_run(cluster, others)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    applied = result.stdout.count("(server dry run)")
    assert applied == len(others), result.stdout
    for kind in PROMETHEUS_OPERATOR_KINDS:
        if find(objects, kind):
            refused = dry_run(cluster, find(objects, kind))
            assert refused.returncode != 0
            assert f'no matches for kind "{kind}" in version "monitoring.coreos.com/v1"' in (
                refused.stderr), refused.stderr


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_pod_security_admission_enforces_restricted_on_every_pod(
    cluster: RunningCluster, restricted_namespace: str, value_set: str
) -> None:
    objects = render(VALUE_SETS[value_set], namespace=restricted_namespace)
    for name, template in pod_templates(objects):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": restricted_namespace,
                            "labels": template["metadata"]["labels"]},
               "spec": template["spec"]}
        # The ServiceAccount must exist for admission (a dry run persists nothing).
        account = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": template["spec"]["serviceAccountName"],
                                "namespace": restricted_namespace}}
        kubectl_ok(cluster, "apply", "-f", "-", input=to_yaml([account]))
        result = dry_run(cluster, [pod])
        assert result.returncode == 0, f"pod of {name} refused:\n{result.stderr}"


def test_a_privileged_pod_is_refused_in_that_namespace(
    cluster: RunningCluster, restricted_namespace: str
) -> None:
    # The control for the test above: enforcement is really on in these namespaces.
    objects = render(namespace=restricted_namespace)
    name, template = next(iter(pod_templates(objects)))
    spec = json.loads(json.dumps(template["spec"]))
    spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    spec["serviceAccountName"] = "default"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": restricted_namespace}, "spec": spec}
    result = dry_run(cluster, [pod])
    assert result.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in result.stderr, result.stderr


def test_plain_manifests_apply_as_their_header_says(cluster: RunningCluster) -> None:
    namespace_file = MANIFESTS / "00-namespace.yaml"
    namespace = yaml.safe_load_all(namespace_file.read_text())
    name = next(doc for doc in namespace if doc)["metadata"]["name"]
    kubectl_ok(cluster, "apply", "-f", str(namespace_file))
    try:
        result = cluster.kubectl("apply", "--dry-run=server", "-f",
                                 str(MANIFESTS / "berthmaster.yaml"))
        assert result.returncode == 0, result.stderr
        assert "Warning" not in result.stderr, result.stderr
        documents = [doc for doc in yaml.safe_load_all(
            (MANIFESTS / "berthmaster.yaml").read_text()) if doc]
        assert result.stdout.count("(server dry run)") == len(documents)
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false")


# ---- helm install for real, and what the RBAC allows --------------------------------------

def test_helm_install_creates_the_objects_and_the_crds(
    cluster: RunningCluster, installed: dict[str, str]
) -> None:
    namespace, prefix = installed["namespace"], installed["prefix"]
    deployments = kubectl_ok(cluster, "get", "deployments", "-n", namespace, "-o", "name")
    assert sorted(deployments.split()) == [f"deployment.apps/{prefix}-operator",
                                           f"deployment.apps/{prefix}-scheduler"]
    for crd in ("machines.machine.openshift.io", "machinesets.machine.openshift.io",
                "clusterautoscalers.autoscaling.openshift.io",
                "machineautoscalers.autoscaling.openshift.io"):
        kubectl_ok(cluster, "wait", "--for=condition=Established", f"crd/{crd}",
                   "--timeout=60s")
    notes = installed["notes"]
    assert "schedulerName: zonal" in notes
    assert f"Lease {namespace}/zonal" in notes
    # NOTES work from a packaged chart: no deploy/ path, no --reuse-values.
    assert "deploy/crds" not in notes
    assert "`helm upgrade` updates them with the chart" in notes
    assert f"helm upgrade {installed['release']} CHART -n {namespace} -f values.yaml" in notes
    # `port-forward ... && curl` never reaches curl: port-forward runs until interrupted.
    assert "&&" not in notes
    assert f"port-forward svc/{prefix}-scheduler-metrics 10260 &\n" in notes


def test_helm_install_owns_and_keeps_the_crds(
    cluster: RunningCluster, installed: dict[str, str]
) -> None:
    """crds.install and crds.keep (the defaults): the CRDs are the release's, so `helm upgrade`
    updates them (test_upgrade.py), and annotated helm.sh/resource-policy: keep."""
    for path in CRDS.glob("*.yaml"):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        crd = json.loads(kubectl_ok(cluster, "get", "crd", name, "-o", "json"))
        annotations = crd["metadata"]["annotations"]
        assert annotations["meta.helm.sh/release-name"] == installed["release"]
        assert annotations["helm.sh/resource-policy"] == "keep"


def test_notes_crd_command_applies_from_a_packaged_chart(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    """With crds.install=false the NOTES' ``helm template RELEASE CHART --show-only
    templates/crds.yaml | kubectl apply --server-side --force-conflicts -f -``, run on the
    packaged chart, applies every CRD (over the field managers of an earlier install)."""
    packaged = helm("package", str(CHART), "--destination", str(tmp_path))
    assert packaged.returncode == 0, packaged.stderr
    (archive,) = tmp_path.glob("berthmaster-*.tgz")
    notes = helm("install", "bmnotes", str(archive), "--dry-run=server", "--set",
                 "crds.install=false", "--namespace", "default",
                 "--kubeconfig", str(cluster.kubeconfig))
    assert notes.returncode == 0, notes.stderr
    (line,) = [line.strip() for line in notes.stdout.splitlines()
               if line.strip().startswith("helm template bmnotes CHART")]
    assert "deploy/crds" not in notes.stdout
    render_args, apply_args = (part.split() for part in line.split("|", 1))
    shown = helm(*[str(archive) if arg == "CHART" else arg for arg in render_args[1:]])
    assert shown.returncode == 0, shown.stderr
    assert apply_args[0] == "kubectl"
    result = cluster.kubectl(*apply_args[1:], input=shown.stdout)
    assert result.returncode == 0, result.stderr
    applied = sorted(line.split()[0] for line in result.stdout.splitlines())
    expected = sorted(f"customresourcedefinition.apiextensions.k8s.io/"
                      f"{yaml.safe_load(path.read_text())['metadata']['name']}"
                      for path in CRDS.glob("*.yaml"))
    assert applied == expected


def can_i(cluster: RunningCluster, account: str, namespace: str, *question: str) -> bool:
    result = cluster.kubectl("auth", "can-i", *question,
                             f"--as=system:serviceaccount:{namespace}:{account}")
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), f"can-i {question}: {result.stdout} {result.stderr}"
    return answer == "yes"


# (verb, resource[, --subresource=...][, scope]) as `kubectl auth can-i` takes them; {ns} is the
# release namespace and {prefix} the release's object prefix.
SCHEDULER_MAY = [
    ("create", "pods", "--subresource=binding", "-A"),
    ("patch", "pods", "--subresource=status", "-A"),
    ("delete", "pods", "-A"), ("watch", "nodes"), ("list", "persistentvolumeclaims", "-A"),
    ("list", "poddisruptionbudgets.policy", "-A"), ("list", "replicasets.apps", "-A"),
    ("list", "priorityclasses.scheduling.k8s.io"), ("create", "events", "-A"),
    ("watch", "csinodes.storage.k8s.io"), ("watch", "csidrivers.storage.k8s.io"),
    ("watch", "csistoragecapacities.storage.k8s.io", "-A"),
    ("create", "leases.coordination.k8s.io", "-n", "{ns}"),
    ("update", "leases.coordination.k8s.io/zonal", "-n", "{ns}"),
]
SCHEDULER_MAY_NOT = [
    ("create", "pods", "-A"), ("update", "pods", "-A"), ("get", "secrets", "-A"),
    ("update", "leases.coordination.k8s.io/kube-scheduler", "-n", "{ns}"),
    ("update", "leases.coordination.k8s.io/zonal", "-n", "kube-system"),
    ("patch", "nodes"), ("create", "pods", "--subresource=eviction", "-A"),
]
OPERATOR_MAY = [
    ("patch", "machines.machine.openshift.io", "-A"),
    ("update", "machines.machine.openshift.io", "--subresource=status", "-A"),
    ("patch", "machinesets.machine.openshift.io", "--subresource=scale", "-A"),
    ("watch", "machinehealthchecks.machine.openshift.io", "-A"),
    ("patch", "machinehealthchecks.machine.openshift.io", "--subresource=status", "-A"),
    ("delete", "machines.machine.openshift.io", "-A"),
    ("create", "nodes"), ("delete", "nodes"), ("patch", "nodes"),  # kwok's Nodes; cordon
    ("list", "pods", "-A"), ("create", "pods", "--subresource=eviction", "-A"),
    ("create", "events", "-A"), ("list", "namespaces"),
    ("create", "jobs.batch", "-n", "{ns}"), ("create", "cronjobs.batch", "-n", "{ns}"),
    ("create", "configmaps", "-n", "{ns}"), ("get", "configmaps", "-n", "{ns}"),
    ("patch", "clusterautoscalers.autoscaling.openshift.io"),
    ("patch", "deschedulers.berthmaster.io", "-A"),
    ("patch", "deschedulers.berthmaster.io", "--subresource=status", "-A"),
    ("watch", "customresourcedefinitions.apiextensions.k8s.io"),
]
OPERATOR_MAY_NOT = [
    ("create", "pods", "-A"), ("get", "secrets", "-A"),
    ("create", "pods", "--subresource=binding", "-A"),
    ("patch", "pods", "--subresource=status", "-A"),
    ("delete", "pods", "-A"), ("update", "nodes"),
    ("bind", "clusterroles.rbac.authorization.k8s.io/cluster-admin"),
    ("escalate", "clusterroles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io"),
    ("create", "clusterroles.rbac.authorization.k8s.io"),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
    ("create", "roles.rbac.authorization.k8s.io", "-n", "{ns}"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "-n", "{ns}"),
    ("create", "serviceaccounts", "-A"),
    ("create", "jobs.batch", "-A"), ("create", "jobs.batch", "-n", "kube-system"),
    ("create", "configmaps", "-n", "kube-system"), ("get", "configmaps", "-n", "default"),
    ("list", "configmaps", "-A"),
    ("create", "customresourcedefinitions.apiextensions.k8s.io"),
    ("impersonate", "serviceaccounts", "-A"),
    ("delete", "machinehealthchecks.machine.openshift.io", "-A"),
    ("create", "machinehealthchecks.machine.openshift.io", "-A"),
]
# The descheduler Jobs' account: the documented descheduler-cluster-role and what a pass reads.
DESCHEDULER_MAY = [
    ("create", "pods", "--subresource=eviction", "-A"), ("list", "pods", "-A"),
    ("delete", "pods", "-A"), ("watch", "nodes"), ("list", "namespaces"),
    ("list", "priorityclasses.scheduling.k8s.io"), ("list", "poddisruptionbudgets.policy", "-A"),
    ("create", "events.events.k8s.io", "-A"),
]
DESCHEDULER_MAY_NOT = [
    ("create", "pods", "-A"), ("update", "pods", "-A"), ("get", "secrets", "-A"),
    ("create", "pods", "--subresource=binding", "-A"),
    ("get", "configmaps", "-n", "{ns}"), ("patch", "nodes"), ("delete", "nodes"),
    ("create", "jobs.batch", "-n", "{ns}"),
    ("create", "clusterroles.rbac.authorization.k8s.io"),
    ("patch", "deschedulers.berthmaster.io", "-A"),
]


@pytest.mark.parametrize(("account", "question", "expected"), [
    *[("scheduler", q, True) for q in SCHEDULER_MAY],
    *[("scheduler", q, False) for q in SCHEDULER_MAY_NOT],
    *[("operator", q, True) for q in OPERATOR_MAY],
    *[("operator", q, False) for q in OPERATOR_MAY_NOT],
    *[("descheduler", q, True) for q in DESCHEDULER_MAY],
    *[("descheduler", q, False) for q in DESCHEDULER_MAY_NOT],
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else str(value))
def test_rbac_allows_exactly_what_each_component_needs(
    cluster: RunningCluster, installed: dict[str, str], account: str,
    question: tuple[str, ...], expected: bool
) -> None:
    namespace, prefix = installed["namespace"], installed["prefix"]
    asked = [part.format(ns=namespace, prefix=prefix) for part in question]
    assert can_i(cluster, f"{prefix}-{account}", namespace, *asked) is expected


