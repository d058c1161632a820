"""The ClusterAutoscaler grows a kwok MachineSet for a pod that fits nowhere and shrinks it
again once the node is idle, run by the operator in the cluster."""

from __future__ import annotations

from typing import Any

import yaml

from e2e.conftest import SCHEDULER, Kind, wait_for

POOL_LABEL = "e2e.berthmaster.io/pool"


def pool(name: str) -> dict[str, Any]:
    selector = {"machine.openshift.io/cluster-api-machineset": name}
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": selector}, "spec": {
                     "metadata": {"labels": {POOL_LABEL: name}},
                     "providerSpec": {"value": {
                         "apiVersion": "berthmaster.io/v1alpha1",
                         "kind": "KwokMachineProviderSpec",
                         "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}}}}}},
    }


def test_pending_pod_grows_the_machineset_and_the_idle_node_goes(kind: Kind,
                                                                 namespace: str) -> None:
    name = f"grow-{namespace}"
    kind.apply(yaml.safe_dump(pool(name)), namespace)
    kind.apply(yaml.safe_dump({
        "apiVersion": "autoscaling.openshift.io/v1beta1", "kind": "MachineAutoscaler",
        "metadata": {"name": name},
        "spec": {"minReplicas": 0, "maxReplicas": 2, "scaleTargetRef": {
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": name}}}),
        namespace)
    kind.apply(yaml.safe_dump({
        "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
        "metadata": {"name": "default"},
        "spec": {"scaleDown": {"enabled": True, "delayAfterAdd": "1s", "delayAfterDelete": "1s",
                               "delayAfterFailure": "1s", "unneededTime": "10s"}}}))
    try:
        kind.apply(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "needs-a-machine"},
            "spec": {"schedulerName": SCHEDULER, "nodeSelector": {POOL_LABEL: name},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "1500m"}}}]}}),
            namespace)

        def replicas() -> int:
            return int(kind.get("machineset", name, "-n", namespace)["spec"].get("replicas") or 0)

        wait_for(lambda: replicas() == 1, "the MachineSet scaled up to 1", timeout=180)

        def running_on() -> str | None:
            pod = kind.get("pod", "needs-a-machine", "-n", namespace)
            return pod["spec"].get("nodeName") if pod["status"].get("phase") == "Running" else None

        node = wait_for(running_on, "the pod running on the new node", timeout=180)
        assert kind.get("node", node)["metadata"]["labels"][POOL_LABEL] == name
        triggered = [e for e in kind.items("events", "-n", namespace, "--field-selector",
                                           "involvedObject.name=needs-a-machine")
                     if e["reason"] == "TriggeredScaleUp"]
        assert triggered and triggered[0]["source"]["component"] == "cluster-autoscaler"

        kind.run("delete", "pod", "needs-a-machine", "-n", namespace)
        wait_for(lambda: replicas() == 0, "the MachineSet scaled down to 0", timeout=240)
        wait_for(lambda: not kind.exists("node", node), f"node {node} gone", timeout=120)
    finally:
        kind.run("delete", "clusterautoscaler", "default", "--wait=false", check=False)
        kind.run("delete", "machineautoscaler", name, "-n", namespace, "--wait=false",
                 check=False)
