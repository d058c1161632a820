"""The placement admission webhook as the chart runs it, on real kubelets: its own Deployment of
two replicas behind a Service, called by the API server for the namespaces it selects.

`make e2e` installs the chart with ``admission.enabled=true`` and a namespaceSelector on the
label ``berthmaster-e2e-admission=on`` (e2e/run.py), so only this file's namespaces are sent to
it; on the real-kubelet cluster its replicas are kept on the real node (kwok nodes only pretend
to run pods). The rule exercised is PodNodeSelector's (plugin/pkg/admission/podnodeselector/
admission.go of k8s.io/kubernetes v1.35.4): a namespace's
``scheduler.alpha.kubernetes.io/node-selector`` is merged into every new pod's nodeSelector.
With ``failurePolicy: Fail`` (the chart's default) losing one replica must refuse nothing: the
PodDisruptionBudget and the second replica are there for that (docs/admission.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conftest import IMAGE, NAMESPACE, Kind, wait_for

LABEL = "berthmaster-e2e-admission"  # e2e/run.py ADMISSION_LABEL
SELECTOR_ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"
DEPLOYMENT = "berthmaster-admission"


@pytest.fixture
def selected(kind: Kind) -> Iterator[str]:
    """A namespace the webhook is asked about, whose pods get ``e2e-admission=yes``."""
    name = f"e2e-adm-{uuid.uuid4().hex[:6]}"
    kind.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {LABEL: "on"},
        "annotations": {SELECTOR_ANNOTATION: "e2e-admission=yes"}}}))
    try:
        yield name
    finally:
        kind.run("delete", "namespace", name, "--wait=false", check=False)


def pod(name: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"containers": [{"name": "c", "image": IMAGE,
                                                "imagePullPolicy": "IfNotPresent"}]}})


def ready_replicas(kind: Kind) -> int:
    status = kind.get("deployment", DEPLOYMENT, "-n", NAMESPACE).get("status") or {}
    return int(status.get("readyReplicas") or 0)


def replicas_ready(kind: Kind) -> list[dict[str, Any]]:
    """The webhook's pods when both are Ready, else an empty list."""
    pods = kind.items("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=admission")
    ready = [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (p.get("status") or {}).get("conditions") or [])]
    return ready if len(ready) == 2 else []


def test_two_replicas_serve_the_namespace_selector(kind: Kind, selected: str) -> None:
    """Both replicas run (Ready, so their HTTPS port answers), and a pod created in a selected
    namespace is stored with the namespace's node selector merged in."""
    wait_for(lambda: replicas_ready(kind), "two Ready admission replicas", timeout=180)
    kind.apply(pod("merged"), namespace=selected)
    stored = kind.get("pod", "merged", "-n", selected)
    assert stored["spec"].get("nodeSelector") == {"e2e-admission": "yes"}


def test_losing_a_replica_refuses_no_pod(kind: Kind, selected: str) -> None:
    """One replica is deleted while pods are being created: with ``failurePolicy: Fail`` every
    creation still succeeds (the Service sends the API server to the replica left, the deleted
    one fails its readiness while it drains), every pod gets the mutation, and the Deployment
    is back to two Ready replicas."""
    victim = wait_for(lambda: replicas_ready(kind), "two Ready admission replicas",
                      timeout=180)[0]["metadata"]["name"]
    kind.run("delete", "pod", victim, "-n", NAMESPACE, "--wait=false")
    for index in range(12):
        kind.apply(pod(f"during-{index}"), namespace=selected)
    stored = kind.items("pods", "-n", selected)
    assert sorted(p["metadata"]["name"] for p in stored) == sorted(
        f"during-{index}" for index in range(12))
    assert all(p["spec"].get("nodeSelector") == {"e2e-admission": "yes"} for p in stored)
    wait_for(lambda: replicas_ready(kind), "two Ready admission replicas again", timeout=180)
    assert victim not in {p["metadata"]["name"] for p in replicas_ready(kind)}
    assert ready_replicas(kind) == 2
