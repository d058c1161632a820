"""The descheduler by real usage: metrics-server (e2e/run.py deploys it in kubelet mode,
berthmaster/tooling/devcluster/metrics_server.py) reports what a busy pod on the real kubelet
really uses, far above its request, and a LowNodeUtilization pass by actual usage
(kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization/usageclients.go
actualUsageClient; lownodeutilization.go) reads that usage through the Descheduler resource's
Job.

Which nodes the pass considers: the real kubelet only (the policy's ``nodeSelector``). The kwok
workers are absent from the metrics API (metrics-server scrapes kubelets; kwok's nodes have
none), and upstream's actualUsageClient fails the strategy for a node it has no metrics for
(usageclients.go sync: "unable to find node ... in the collected metrics"). With one real node,
LowNodeUtilization has no under-utilized node to move pods to (lownodeutilization.go Balance:
"No node is underutilized, nothing to do here"), so this pass evicts nothing and says so. An
eviction by usage needs a second node in the metrics API with low usage; a second kubelet on
this host does not give one: a kubelet's node usage is its root cgroup's, the whole host's, so
two kubelets here report the same usage.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml

from e2e.conftest import IMAGE, MODE, NAMESPACE, Kind, wait_for
from e2e.test_descheduler import completed_job

REAL_NODE = "berthmaster.io/node=kubelet"
BURN = "while True: pass"

pytestmark = pytest.mark.skipif(MODE != "kubelet", reason="metrics-server is deployed by "
                                "e2e/run.py in kubelet mode only")


def burner(name: str) -> dict[str, Any]:
    """A pod that keeps one CPU busy while requesting 10m of it, on the real kubelet."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"berthmaster.io/node": "kubelet"},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "burn", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                            "command": ["/opt/berthmaster/bin/python", "-c", BURN],
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
    }


def millicores(quantity: str) -> float:
    if quantity.endswith("n"):
        return int(quantity[:-1]) / 1e6
    if quantity.endswith("u"):
        return int(quantity[:-1]) / 1e3
    if quantity.endswith("m"):
        return float(quantity[:-1])
    return float(quantity) * 1000


def usage_policy() -> dict[str, Any]:
    """LowNodeUtilization by actual usage as upstream's README writes it (pkg/api/v1alpha2
    types.go MetricsProviders; nodeutilization/types.go MetricsUtilization), over the real
    kubelet only. ``metricsProviders`` alone: upstream refuses it beside the deprecated
    ``metricsCollector: {enabled: true}`` (pkg/api/v1alpha2 validation)."""
    return {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "nodeSelector": REAL_NODE,
        "metricsProviders": [{"source": "KubernetesMetrics"}],
        "profiles": [{"name": "usage", "pluginConfig": [{"name": "LowNodeUtilization", "args": {
            "thresholds": {"cpu": 20, "memory": 20, "pods": 20},
            "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50},
            "metricsUtilization": {"source": "KubernetesMetrics"}}}],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}],
    }


def test_metrics_server_reports_a_busy_pods_real_usage_and_a_usage_pass_reads_it(
        kind: Kind, namespace: str) -> None:
    name = f"burn-{uuid.uuid4().hex[:6]}"
    kind.apply(yaml.safe_dump(burner(name)), namespace)
    kind.run("wait", "--for=condition=Ready", f"pod/{name}", "-n", namespace, "--timeout=120s")

    def busy() -> float | None:
        found = kind.run("get", "--raw",
                         f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}",
                         check=False)
        if found.returncode != 0:
            return None
        used = sum(millicores(c["usage"]["cpu"]) for c in yaml.safe_load(found.stdout)
                   ["containers"])
        return used if used > 100 else None  # ten times its 10m request

    used = wait_for(busy, f"metrics-server reporting {name}'s CPU", timeout=180)
    print(f"metrics-server: {name} uses {used:.0f}m CPU (requests 10m)")
    (real,) = kind.items("nodes", "-l", REAL_NODE)
    node_metrics = yaml.safe_load(kind.raw(
        f"/apis/metrics.k8s.io/v1beta1/nodes/{real['metadata']['name']}"))
    assert millicores(node_metrics["usage"]["cpu"]) >= used * 0.5

    run = f"e2e-usage-{uuid.uuid4().hex[:6]}"
    kind.apply(yaml.safe_dump({
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": run}, "spec": {"policy": usage_policy()}}))
    try:
        job = completed_job(kind, run)
        log = kind.run("logs", f"job/{job}", "-n", NAMESPACE).stdout
        print(log)
        assert "MetricsAPIUnavailable" not in log
        assert "descheduler pass (descheduler/v1alpha2): 1 of" in log
        assert "no node is underutilized, nothing to do here" in log
        assert kind.get("pod", name, "-n", namespace)["metadata"].get(
            "deletionTimestamp") is None
    finally:
        kind.run("delete", "descheduler", run, "--wait=false", check=False)
        kind.run("delete", "pod", name, "-n", namespace, "--wait=false", check=False)
