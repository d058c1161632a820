"""Pod facts shared by the drain, the autoscaler and the descheduler (scheduler/pods.py).

A DaemonSet pod has two upstream definitions and each caller keeps its own: kubectl drain's
``daemonSetFilter`` (k8s.io/kubectl pkg/drain/filters.go) and cluster-autoscaler's
``pod.IsDaemonSetPod`` (utils/pod/pod.go) ask the controller owner reference
(``metav1.GetControllerOf``); the descheduler's ``utils.IsDaemonsetPod`` (pkg/utils/pod.go)
asks every owner reference. The rows where they differ are a DaemonSet reference without
``controller: true``, and a DaemonSet that is an owner beside another controller.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import IGNORE, PdbBudget, classify
from berthmaster.operator.machines.drain import plan_drain
from berthmaster.scheduler.descheduler.protection import EvictorSettings, protection_reasons
from berthmaster.scheduler.pods import (
    has_daemonset_owner,
    is_daemonset_pod,
    is_mirror_pod,
)
from tests.support.builders import make_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def ref(kind: str, controller: bool) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": f"{kind}-uid",
            "controller": controller}


def owned(*refs: dict[str, Any]) -> dict[str, Any]:
    pod = make_pod("p", "ns", node_name="n")
    pod["metadata"]["ownerReferences"] = list(refs)
    return pod


@pytest.mark.parametrize(("refs", "controller_is_daemonset", "any_owner_is_daemonset"), [
    ((), False, False),
    ((ref("DaemonSet", True),), True, True),
    ((ref("ReplicaSet", True),), False, False),
    ((ref("DaemonSet", False),), False, True),
    ((ref("ReplicaSet", True), ref("DaemonSet", False)), False, True),
])
def test_the_two_upstream_definitions_of_a_daemonset_pod(
        refs: tuple[dict[str, Any], ...], controller_is_daemonset: bool,
        any_owner_is_daemonset: bool) -> None:
    pod = owned(*refs)
    assert is_daemonset_pod(pod) is controller_is_daemonset
    assert has_daemonset_owner(pod) is any_owner_is_daemonset


def test_each_caller_keeps_its_upstreams_definition() -> None:
    """A DaemonSet owner reference without ``controller: true``: the drain evicts the pod
    (kubectl's filter does not see a DaemonSet), the descheduler protects it."""
    pod = owned(ref("DaemonSet", False))
    assert plan_drain([pod], unreachable=False, now=NOW).evict == [pod]
    assert "daemonset pods are protected against eviction" in protection_reasons(
        pod, EvictorSettings(), None)
    daemon = owned(ref("DaemonSet", True))
    assert classify(daemon, AutoscalerConfig(), PdbBudget([]), priority=0) == IGNORE


def test_mirror_pod_and_ref() -> None:
    pod = make_pod("p", "ns")
    assert not is_mirror_pod(pod)
    pod["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    assert is_mirror_pod(pod)
