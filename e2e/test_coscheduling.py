"""Gang scheduling on the e2e cluster: the chart's scheduler runs Coscheduling because e2e/run.py
installs it with examples/coscheduling/values.yaml (docs/coscheduling.md's chart value); the
gang is examples/coscheduling/gang.yaml, applied as users do. Semantics are scheduler-plugins'
(pkg/coscheduling/coscheduling.go, core/core.go): no member binds before minMember can, and the
PodGroup's status is kept by the operator's podgroups capability (scheduler-plugins
pkg/controllers/podgroup_controller.go)."""

from __future__ import annotations

from typing import Any

import yaml

from e2e.conftest import MODE, ROOT, SCHEDULER, Kind, wait_for
from e2e.test_scheduling import events, node_of

GANG = ROOT / "examples" / "coscheduling" / "gang.yaml"
KUBELET_LABEL = ("berthmaster.io/node", "kubelet")  # the real kubelet's node (e2e/run.py)


def gang_documents(size: int | None = None) -> list[dict[str, Any]]:
    """gang.yaml for this cluster: the chart's schedulerName, tiny requests, and on the
    real-kubelet cluster the kubelet's node, so the containers really run; ``size`` keeps
    that many of its pods."""
    documents = [d for d in yaml.safe_load_all(GANG.read_text()) if d]
    pods = [d for d in documents if d["kind"] == "Pod"][:size]
    for pod in pods:
        pod["spec"]["schedulerName"] = SCHEDULER
        for container in pod["spec"]["containers"]:
            container["resources"]["requests"] = {"cpu": "10m", "memory": "16Mi"}
        if MODE == "kubelet":
            pod["spec"]["nodeSelector"] = dict([KUBELET_LABEL])
    return [*(d for d in documents if d["kind"] != "Pod"), *pods]


def test_a_gang_of_real_pods_runs_together(kind: Kind, namespace: str) -> None:
    documents = gang_documents()
    (group,) = [d["metadata"]["name"] for d in documents if d["kind"] == "PodGroup"]
    names = [d["metadata"]["name"] for d in documents if d["kind"] == "Pod"]
    kind.apply(yaml.safe_dump_all(documents), namespace)
    for name in names:
        node_of(kind, namespace, name)
        (scheduled, *_) = wait_for(lambda n=name: events(kind, namespace, n, "Scheduled"),
                                   f"a Scheduled event for {name}")
        assert scheduled["source"]["component"] == SCHEDULER

    def running() -> bool:
        return all(kind.get("pod", n, "-n", namespace)["status"].get("phase") == "Running"
                   for n in names)

    wait_for(lambda: running() or None, "every member running", timeout=180)

    def group_running() -> dict[str, Any] | None:
        status = kind.get("podgroup", group, "-n", namespace).get("status") or {}
        return status if status.get("phase") == "Running" else None

    status = wait_for(group_running, "the PodGroup Running")
    assert status["running"] == len(names)


def test_a_gang_short_of_min_member_binds_nothing_and_says_why(kind: Kind,
                                                               namespace: str) -> None:
    """Two pods of a group whose minMember is 3: Coscheduling's PreFilter refuses them with
    upstream's words, and neither is bound."""
    documents = gang_documents(size=2)
    kind.apply(yaml.safe_dump_all(documents), namespace)
    names = [d["metadata"]["name"] for d in documents if d["kind"] == "Pod"]
    words = "cannot find enough sibling pods, current pods number: 2, minMember of group: 3"
    for name in names:
        # the first pod may be tried before its sibling exists ("current pods number: 1");
        # the sibling's arrival requeues it, and the next attempt counts both
        def refused(n: str = name) -> list[dict[str, Any]]:
            return [e for e in events(kind, namespace, n, "FailedScheduling")
                    if words in e["message"]]

        wait_for(refused, f"a FailedScheduling event for {name} counting both pods")
        assert not kind.get("pod", name, "-n", namespace)["spec"].get("nodeName")
