"""The descheduler by real usage: metrics-server (e2e/run.py deploys it in kubelet mode,
berthmaster/tooling/devcluster/metrics_server.py) reports what a busy pod on the real kubelet
really uses, far above its request, and a LowNodeUtilization pass by actual usage
(kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization/usageclients.go
actualUsageClient; lownodeutilization.go) evicts it, where the same pass by requests does not.

The nodes: the real kubelet, whose usage is the whole host's (its root cgroup: the control
plane, the tests and the busy pod on two cores), and the kwok workers, whose resource metrics
kwok serves (berthmaster/tooling/devcluster/data/kwok-metrics.yaml: 1m of CPU a container)
and metrics-server scrapes through each node's ``metrics.k8s.io/resource-metrics-path``
(kwok_incluster.py). By usage the real node is over the target and the kwok workers under
the threshold; by requests (10m for the busy pod) it is not over. The pass considers these
nodes only (the policy's ``nodeSelector``: upstream's actualUsageClient fails the strategy for
a node without metrics, and the Machines other tests make are kwok nodes without them) and
the busy pod only (the DefaultEvictor's ``labelSelector``), so nothing of the release's moves.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml

from berthmaster.scheduler.quantities import quantity_value
from berthmaster.tooling.devcluster.kwok_incluster import RESOURCE_METRICS_ANNOTATION
from e2e.conftest import IMAGE, MODE, NAMESPACE, Kind, wait_for
from e2e.test_descheduler import completed_job

REAL_NODE = "berthmaster.io/node=kubelet"
BURN = "while True: pass"

pytestmark = pytest.mark.skipif(MODE != "kubelet", reason="metrics-server is deployed by "
                                "e2e/run.py in kubelet mode only")


def burner(name: str) -> dict[str, Any]:
    """A ReplicaSet (so the descheduler may evict its pod) of one pod that keeps one CPU busy
    while requesting 10m of it, on the real kubelet."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeSelector": {"berthmaster.io/node": "kubelet"},
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "burn", "image": IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "command": ["/opt/berthmaster/bin/python", "-c", BURN],
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def millicores(quantity: str) -> float:
    """A metrics API cpu quantity ("1150470297n", "250m") in millicores."""
    return float(quantity_value("cpu", quantity))


def policy(selector: str, app: str, by_usage: bool) -> dict[str, Any]:
    """LowNodeUtilization on cpu (under 20 %, over 40 %), over the labelled nodes and the busy
    pod only; by actual usage as upstream's README writes it (pkg/api/v1alpha2 types.go
    MetricsProviders; nodeutilization/types.go MetricsUtilization), or by requests."""
    args: dict[str, Any] = {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 40}}
    top: dict[str, Any] = {}
    if by_usage:
        args["metricsUtilization"] = {"source": "KubernetesMetrics"}
        top["metricsProviders"] = [{"source": "KubernetesMetrics"}]
    return {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "nodeSelector": selector, **top,
        "profiles": [{"name": "usage", "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"labelSelector": {"matchLabels": {"app": app}}}},
            {"name": "LowNodeUtilization", "args": args}],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}],
    }


def run_descheduler(kind: Kind, body: dict[str, Any]) -> str:
    """Run a Descheduler with ``body`` as its policy; its Job's log."""
    run = f"e2e-usage-{uuid.uuid4().hex[:6]}"
    kind.apply(yaml.safe_dump({"apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
                               "metadata": {"name": run}, "spec": {"policy": body}}))
    try:
        job = completed_job(kind, run)
        log = kind.run("logs", f"job/{job}", "-n", NAMESPACE).stdout
        print(log)
        return log
    finally:
        kind.run("delete", "descheduler", run, "--wait=false", check=False)


def test_a_usage_pass_evicts_the_busy_pod_a_requests_pass_keeps(kind: Kind,
                                                                 namespace: str) -> None:
    name = f"burn-{uuid.uuid4().hex[:6]}"
    kind.apply(yaml.safe_dump(burner(name)), namespace)
    (real,) = kind.items("nodes", "-l", REAL_NODE)
    real_name = real["metadata"]["name"]
    workers = [n["metadata"]["name"] for n in kind.items("nodes")
               if RESOURCE_METRICS_ANNOTATION in (n["metadata"].get("annotations") or {})]
    assert workers, "no kwok worker carries the resource metrics annotation (e2e/run.py)"
    key, value = "berthmaster.io/e2e-usage", name
    kind.run("label", "node", real_name, *workers, f"{key}={value}")
    try:
        def running() -> str | None:
            pods = [p for p in kind.items("pods", "-n", namespace, "-l", f"app={name}")
                    if (p.get("status") or {}).get("phase") == "Running"]
            return pods[0]["metadata"]["name"] if pods else None

        pod = wait_for(running, f"{name}'s pod running")

        def busy() -> float | None:
            found = kind.run("get", "--raw",
                             f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{pod}",
                             check=False)
            if found.returncode != 0:
                return None
            used = sum(millicores(c["usage"]["cpu"]) for c in yaml.safe_load(found.stdout)
                       ["containers"])
            return used if used > 100 else None  # ten times its 10m request

        used = wait_for(busy, f"metrics-server reporting {pod}'s CPU", timeout=180)

        def every_node_measured() -> dict[str, float] | None:
            found = kind.run("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes", check=False)
            if found.returncode != 0:
                return None
            usage = {i["metadata"]["name"]: millicores(i["usage"]["cpu"])
                     for i in yaml.safe_load(found.stdout)["items"]}
            return usage if {real_name, *workers} <= set(usage) else None

        usage = wait_for(every_node_measured, "metrics-server reporting the kwok workers",
                         timeout=180)
        allocatable = millicores(real["status"]["allocatable"]["cpu"])
        print(f"metrics-server: {pod} uses {used:.0f}m CPU (requests 10m); nodes (m): "
              f"{ {n: round(u) for n, u in usage.items() if n in {real_name, *workers}} }; "
              f"{real_name} allocatable {allocatable:.0f}m")
        assert usage[real_name] > 0.4 * allocatable  # the premise: busy by measure
        assert all(usage[w] < 0.2 * millicores(kind.get("node", w)["status"]["allocatable"]
                                                ["cpu"]) for w in workers)

        by_requests = run_descheduler(kind, policy(f"{key}={value}", name, by_usage=False))
        assert "total: evicted 0 pod(s)" in by_requests
        assert kind.get("pod", pod, "-n", namespace)["metadata"].get(
            "deletionTimestamp") is None

        by_usage = run_descheduler(kind, policy(f"{key}={value}", name, by_usage=True))
        assert "MetricsAPIUnavailable" not in by_usage
        assert f"LowNodeUtilization: evicted {namespace}/{pod} from {real_name}" in by_usage
        assert "total: evicted 1 pod(s)" in by_usage

        def evicted() -> bool:
            found = kind.run("get", "pod", pod, "-n", namespace, "-o", "json", check=False)
            return found.returncode != 0 or bool(
                yaml.safe_load(found.stdout)["metadata"].get("deletionTimestamp"))

        wait_for(evicted, f"{pod} evicted")
    finally:
        kind.run("label", "node", real_name, *workers, f"{key}-", check=False)
        kind.run("delete", "replicaset", name, "-n", namespace, "--wait=false", check=False)
