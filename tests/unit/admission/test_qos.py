"""The QoS class PodTolerationRestriction reads (non-BestEffort pods tolerate memory pressure),
computed as upstream's ComputePodQOS (pkg/apis/core/helper/qos/qos.go): only positive cpu and
memory count, quantities compare by value, pod-level resources replace the containers'."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.descheduler.protection import qos_class
from tests.support.builders import make_pod


def with_resources(requests: dict[str, str] | None = None,
                   limits: dict[str, str] | None = None,
                   pod_level: dict[str, Any] | None = None) -> dict[str, Any]:
    pod = make_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": requests or {},
                                                 "limits": limits or {}}
    if pod_level is not None:
        pod["spec"]["resources"] = pod_level
    return pod


@pytest.mark.parametrize("case,pod,expected", [
    ("nothing", make_pod(), "BestEffort"),
    ("only ephemeral-storage", with_resources({"ephemeral-storage": "1Gi"}), "BestEffort"),
    ("zero quantities", with_resources({"cpu": "0"}, {"memory": "0"}), "BestEffort"),
    ("requests only", with_resources({"cpu": "100m"}), "Burstable"),
    ("equal by value", with_resources({"cpu": "1", "memory": "1Gi"},
                                      {"cpu": "1000m", "memory": "1024Mi"}), "Guaranteed"),
    # As written: the API server defaults requests from limits before admission sees a pod.
    ("limits only", with_resources(None, {"cpu": "1", "memory": "1Gi"}), "Burstable"),
    ("one limit missing", with_resources({"cpu": "1"}, {"cpu": "1"}), "Burstable"),
    ("pod-level resources", with_resources(pod_level={
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
     "Guaranteed"),
    ("declared status wins", {**make_pod(), "status": {"qosClass": "Burstable"}}, "Burstable"),
])
def test_qos_class(case: str, pod: dict[str, Any], expected: str) -> None:
    assert qos_class(pod) == expected, case
