"""The autoscaler's pod cache keeps a trimmed record (operator/autoscaler/trim.py); every
decision made on it is the one the whole pod gets (as kube-scheduler's informer transform,
pkg/scheduler/scheduler.go newPodInformer, drops what nothing reads)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import (
    SAFE_TO_EVICT_KEY,
    SAFE_TO_EVICT_LOCAL_VOLUMES_KEY,
    PdbBudget,
    classify,
)
from berthmaster.operator.autoscaler.resources import pod_requests
from berthmaster.operator.autoscaler.scaleup import (
    POD_SCALE_UP_DELAY_KEY,
    is_unschedulable,
    scale_up_delay,
)
from berthmaster.operator.autoscaler.trim import trim_pod
from berthmaster.scheduler.pods import MIRROR_ANNOTATION, is_mirror_pod
from tests.unit.autoscaler.builders import make_pod

KEEP_LOCAL = AutoscalerConfig(skip_nodes_with_local_storage=False)


def dressed(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with what the API server also sends: managedFields, unread annotations, env,
    probes, status details."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    pod["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied"] = \
        "x" * 2000
    for container in pod["spec"]["containers"]:
        container["env"] = [{"name": f"E{i}", "value": "v" * 50} for i in range(20)]
        container["livenessProbe"] = {"httpGet": {"path": "/", "port": 80}}
    pod["spec"]["volumes"] = [*pod["spec"].get("volumes", []),
                              {"name": "token", "projected": {"sources": [{}]}}]
    pod.setdefault("status", {})["containerStatuses"] = [{"name": "c", "ready": True}]
    return pod


CASES = [
    make_pod("plain"),
    make_pod("bare", owner=None),
    make_pod("ds", owner="DaemonSet"),
    make_pod("pending", unschedulable=True),
    make_pod("delayed", unschedulable=True, annotations={POD_SCALE_UP_DELAY_KEY: "5m"}),
    make_pod("unsafe", annotations={SAFE_TO_EVICT_KEY: "false"}),
    make_pod("safe", owner=None, annotations={SAFE_TO_EVICT_KEY: "true"}),
    make_pod("mirror", owner=None, annotations={MIRROR_ANNOTATION: "x"}),
    make_pod("scratch", volumes=[{"name": "s", "emptyDir": {"sizeLimit": "1Gi"}}]),
    make_pod("allowed", volumes=[{"name": "s", "emptyDir": {}}],
             annotations={SAFE_TO_EVICT_LOCAL_VOLUMES_KEY: "s"}),
    make_pod("host", volumes=[{"name": "h", "hostPath": {"path": "/var"}}]),
    make_pod("system", namespace="kube-system"),
]


@pytest.mark.parametrize("pod", CASES, ids=lambda p: p["metadata"]["name"])
def test_decisions_on_the_trimmed_pod_are_the_whole_pods(pod: dict[str, Any]) -> None:
    whole = dressed(pod)
    trimmed = trim_pod(copy.deepcopy(whole))
    for config in (AutoscalerConfig(), KEEP_LOCAL):
        assert classify(trimmed, config, PdbBudget([]), 0) == \
            classify(whole, config, PdbBudget([]), 0)
    assert is_unschedulable(trimmed) == is_unschedulable(whole)
    assert scale_up_delay(trimmed, 10.0) == scale_up_delay(whole, 10.0)
    assert is_mirror_pod(trimmed) == is_mirror_pod(whole)
    assert pod_requests(trimmed) == pod_requests(whole)
    assert "managedFields" not in trimmed["metadata"]
    assert "kubectl.kubernetes.io/last-applied" not in (
        trimmed["metadata"].get("annotations") or {})
    assert len(repr(trimmed)) < len(repr(whole)) / 2
