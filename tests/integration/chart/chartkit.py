"""Rendering the Helm chart in tests: helm itself, the value sets, and the rendered objects.

Design: every test renders through the real ``helm`` binary (the one the local control plane
builds from the Go module proxy), so lint, schema validation and template logic are Helm's own.
The value sets users are expected to reach for are named here once; tests iterate over them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from berthmaster.tooling.devcluster.build import KUBE_VERSION

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "berthmaster"
CRDS = ROOT / "deploy" / "crds"
SAMPLES = ROOT / "deploy" / "samples"
MANIFESTS = ROOT / "deploy" / "manifests"
SEED_SAMPLES = Path(__file__).resolve().parent / "seed_samples"
# The documented Policy files (JSON, and YAML with `...` placeholders): seed_policies/README.md.
SEED_POLICIES = Path(__file__).resolve().parent / "seed_policies"


# name -> --set arguments. "defaults" is what `helm install berthmaster charts/berthmaster` does.
VALUE_SETS: dict[str, list[str]] = {
    "defaults": [],
    "ha-off": ["scheduler.replicas=1", "scheduler.leaderElection.enabled=false"],
    "servicemonitor-on": ["metrics.serviceMonitor.enabled=true",
                          "metrics.serviceMonitor.labels.release=prometheus"],
    # the Grafana dashboard ConfigMap and the PrometheusRule (both off by default)
    "observability-on": ["dashboards.enabled=true", "prometheusRule.enabled=true",
                         "prometheusRule.labels.release=prometheus"],
    "tuned": ["scheduler.name=zonal", "priorityClassName=",
              "operator.watchNamespaces={openshift-machine-api,kube-system}",
              "operator.capabilities={machines,deschedulers}",
              "operator.podDisruptionBudget.enabled=true",
              "scheduler.extraArgs={--log-format=text}"],
    # the placement admission webhook (off by default), with a configuration
    "admission-on": ["admission.enabled=true", "admission.failurePolicy=Ignore",
                     "admission.config.pluginConfig.PodNodeConstraints.configuration"
                     ".kind=PodNodeConstraintsConfig"],
    # metrics served over plain HTTP on the pod IP, behind a NetworkPolicy
    "metrics-plain": ["metrics.serving=plain", "metrics.networkPolicy.enabled=true",
                      "metrics.networkPolicy.from[0].namespaceSelector.matchLabels"
                      ".name=monitoring"],
    # the authenticated endpoint with a certificate Secret and a reader bound
    "metrics-tls": ["metrics.tls.secretName=berthmaster-metrics-tls",
                    "metrics.readers[0].kind=ServiceAccount",
                    "metrics.readers[0].name=prometheus-k8s",
                    "metrics.readers[0].namespace=monitoring"],
    # what platform teams set: per-component priority classes, probes, strategies, SELinux and
    # AppArmor within the restricted profile, the scheduler's FlowSchema, objects of their own
    "platform-knobs": ["scheduler.priorityClassName=system-node-critical",
                       "scheduler.livenessProbe.periodSeconds=30",
                       "admission.enabled=true", "admission.readinessProbe.failureThreshold=6",
                       "scheduler.updateStrategy.type=RollingUpdate",
                       "scheduler.updateStrategy.rollingUpdate.maxUnavailable=1",
                       "revisionHistoryLimit=2", "scheduler.flowSchema.enabled=true",
                       "podSecurityContext.seLinuxOptions.type=container_t",
                       "podSecurityContext.seLinuxOptions.level=s0:c1\\,c2",
                       "podSecurityContext.appArmorProfile.type=RuntimeDefault",
                       "podSecurityContext.supplementalGroups={1000}",
                       "containerSecurityContext.appArmorProfile.type=RuntimeDefault",
                       "extraObjects[0].apiVersion=v1", "extraObjects[0].kind=ConfigMap",
                       "extraObjects[0].metadata.name=site-settings"],
    # extraArgs copied from a kube-scheduler Deployment (its flag spellings)
    "kube-scheduler-flags": ["scheduler.leaderElection.leaseDurationSeconds=30",
                             "scheduler.extraArgs={--v=4,--kube-api-qps=100,"
                             "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf}"],
}


# `helm install` on the test session's one control plane: the CRDs are cluster-scoped and shared
# by every release and test of the session, so a release takes them over from whoever applied
# them before (kept by helm.sh/resource-policy: keep when an earlier release was uninstalled),
# as the one upgrade from a chart that installed them from crds/ does (docs/deployment.md).
SHARED_CRDS = ("--take-ownership",)


def helm_binary() -> Path:
    from berthmaster.tooling.devcluster.build import binary_path

    return binary_path("helm")


def helm(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run helm. ``helm template`` renders for the local control plane's Kubernetes version
    unless the caller names one (helm's own default is the minor of the client-go it was built
    with, stamped by berthmaster.tooling.devcluster.build; test_helm_build.py checks that
    default)."""
    if args and args[0] == "template" and "--kube-version" not in args:
        args = (*args, "--kube-version", KUBE_VERSION.removeprefix("v"))
    return subprocess.run([str(helm_binary()), *args], input=input, capture_output=True,
                          text=True, timeout=120, check=False)


def template(sets: Sequence[str] = (), release: str = "berthmaster",
             namespace: str = "berthmaster", include_crds: bool = False
             ) -> subprocess.CompletedProcess[str]:
    args = ["template", release, str(CHART), "--namespace", namespace]
    if include_crds:
        args.append("--include-crds")
    for value in sets:
        args += ["--set", value]
    return helm(*args)


def render(sets: Sequence[str] = (), release: str = "berthmaster",
           namespace: str = "berthmaster") -> list[dict[str, Any]]:
    """The chart's objects for these values; fails the test with helm's message if it fails."""
    result = template(sets, release, namespace)
    assert result.returncode == 0, f"helm template {' '.join(sets)} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_values(values: Mapping[str, Any], *extra: str) -> list[dict[str, Any]]:
    """The chart's objects for a values document (lists of objects are clumsy with --set)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        file.write(yaml.safe_dump(dict(values)))
        file.flush()
        result = helm("template", "berthmaster", str(CHART), "--namespace", "berthmaster",
                      "-f", file.name, *extra)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: Sequence[Mapping[str, Any]], kind: str, name_suffix: str = ""
         ) -> list[Mapping[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind
            and obj["metadata"]["name"].endswith(name_suffix)]


def one(objects: Sequence[Mapping[str, Any]], kind: str, name_suffix: str = ""
        ) -> Mapping[str, Any]:
    found = find(objects, kind, name_suffix)
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, found {len(found)}"
    return found[0]


def pod_templates(objects: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield obj["metadata"]["name"], obj["spec"]["template"]


def component_of(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def to_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all(list(objects), sort_keys=False)


def seed_default_policy() -> dict[str, Any]:
    """The documented default Policy file, as our test data keeps it
    (seed_policies/scheduler-default-policy.json; seed_policies/README.md)."""
    import json

    policy: dict[str, Any] = json.loads(
        (SEED_POLICIES / "scheduler-default-policy.json").read_text())
    return policy
