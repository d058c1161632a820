"""A Descheduler resource run by the operator: its Job runs berthmaster's image on a real
kubelet (`berthmaster deschedule`) and evicts a duplicate through the Eviction API."""

from __future__ import annotations

import uuid
from typing import Any

import yaml

from e2e.conftest import MODE, NAMESPACE, SCHEDULER, Kind, wait_for

OWNER_LABEL = "berthmaster.io/descheduler"


def plain_zone_a_worker(kind: Kind) -> str:
    """A worker the duplicates can share: zone-a, no taints."""
    for node in kind.items("nodes", "-l", "zone=zone-a"):
        if not node["spec"].get("taints"):
            return str(node["metadata"]["name"])
    raise AssertionError("no untainted zone-a worker")


def replica_set(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "schedulerName": SCHEDULER,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "10m"}}}]}}},
    }


def place_both_on(kind: Kind, namespace: str, node: str) -> set[str]:
    """Both replicas on ``node``, the way duplicates arise: every other node is cordoned while
    they are placed (a maintenance window) and uncordoned afterwards."""
    cordoned = [n["metadata"]["name"] for n in kind.items("nodes")
                if n["metadata"]["name"] != node and not n["spec"].get("unschedulable")]
    for name in cordoned:
        kind.run("cordon", name)
    try:
        kind.apply(yaml.safe_dump(replica_set("dup")), namespace)

        def both_on_node() -> list[str] | None:
            pods = kind.items("pods", "-n", namespace, "-l", "app=dup")
            placed = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == node
                      and p["status"].get("phase") == "Running"]
            return placed if len(placed) == 2 else None

        return set(wait_for(both_on_node, f"both replicas running on {node}"))
    finally:
        for name in cordoned:
            kind.run("uncordon", name)


def completed_job(kind: Kind, descheduler: str) -> str:
    """The name of the Job the operator runs for ``descheduler``, once it has completed. The
    Job runs in the operator's (the release's) namespace, as the chart's account."""
    jobs = wait_for(lambda: kind.items("jobs", "-n", NAMESPACE, "-l",
                                       f"{OWNER_LABEL}={descheduler}"), "the descheduler Job")
    job = str(jobs[0]["metadata"]["name"])
    kind.run("wait", "--for=condition=Complete", f"job/{job}", "-n", NAMESPACE,
             "--timeout=240s")
    return job


def test_descheduler_job_runs_on_a_kubelet_and_evicts_a_duplicate(kind: Kind,
                                                                  namespace: str) -> None:
    before = place_both_on(kind, namespace, plain_zone_a_worker(kind))
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    kind.apply(yaml.safe_dump({
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"policy": {
            "apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
            "strategies": {"RemoveDuplicates": {"enabled": True, "params": {
                "namespaces": {"include": [namespace]}}}}}}}))
    try:
        job = completed_job(kind, name)
        (pod,) = kind.items("pods", "-n", NAMESPACE, "-l", f"job-name={job}")
        container = pod["spec"]["containers"][0]
        assert container["command"][:2] == ["berthmaster", "deschedule"]
        status = next(s for s in pod["status"]["containerStatuses"]
                      if s["name"] == container["name"])
        # It really ran: a container of the image exited 0 on a node with a kubelet.
        assert status["state"]["terminated"]["exitCode"] == 0
        assert status["imageID"]
        ran_on = kind.get("node", pod["spec"]["nodeName"])
        if MODE == "kubelet":
            assert ran_on["metadata"]["labels"].get("berthmaster.io/node") == "kubelet"
        assert "kwok.x-k8s.io/node" not in (ran_on["metadata"].get("annotations") or {})

        def one_evicted() -> set[str] | None:
            now = {p["metadata"]["name"] for p in kind.items("pods", "-n", namespace,
                                                           "-l", "app=dup")
                   if not p["metadata"].get("deletionTimestamp")}
            gone = before - now
            return gone or None

        gone = wait_for(one_evicted, "one duplicate evicted")
        assert len(gone) == 1
        (evicted,) = gone
        events = wait_for(lambda: [e for e in kind.items(
            "events", "-n", namespace, "--field-selector", f"involvedObject.name={evicted}")
            if e["reason"] == "RemoveDuplicates"], f"the eviction's event on {evicted}")
        assert events[0]["action"] == "Descheduled"
    finally:
        kind.run("delete", "descheduler", name, "--wait=false", check=False)
