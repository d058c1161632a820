"""Pods placed by berthmaster on kind: taints, dedicated and special-hardware nodes, affinity,
priority and preemption, with the events a user reads. Uses deploy/samples/ as users do."""

from __future__ import annotations

from typing import Any

import yaml

from e2e.conftest import IMAGE, MODE, NAMESPACE, ROOT, SCHEDULER, Kind, wait_for

SAMPLES = ROOT / "deploy" / "samples"


def node_of(kind: Kind, namespace: str, pod: str) -> str:
    def bound() -> str | None:
        return kind.get("pod", pod, "-n", namespace)["spec"].get("nodeName") or None

    return wait_for(bound, f"pod {namespace}/{pod} bound")


def labels_of(kind: Kind, node: str) -> dict[str, str]:
    return dict(kind.get("node", node)["metadata"]["labels"])


def workers(kind: Kind) -> list[dict[str, Any]]:
    return [n for n in kind.items("nodes")
            if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"]]


def scheduler_pods(kind: Kind) -> list[dict[str, Any]]:
    return [p for p in kind.items("pods", "-n", NAMESPACE, "-l",
                                  "app.kubernetes.io/component=scheduler")
            if not p["metadata"].get("deletionTimestamp")]


def test_the_chart_runs_berthmaster_from_its_image_on_a_kubelet(kind: Kind) -> None:
    """Every pod of the release runs the image, read-only as uid 65532, Ready, on a node with
    a real kubelet (not a kwok node): the scheduler, the operator and the admission webhook
    (e2e/run.py installs the chart with ``admission.enabled=true``)."""
    pods = [p for p in kind.items("pods", "-n", NAMESPACE)
            if not p["metadata"].get("deletionTimestamp")]
    assert {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods} == {
        "scheduler", "operator", "admission"}
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running", name
        (container,) = pod["spec"]["containers"]
        assert container["image"].endswith(IMAGE), name
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["imageID"], name
        node = kind.get("node", pod["spec"]["nodeName"])
        assert "kwok.x-k8s.io/node" not in (node["metadata"].get("annotations") or {}), name
        if MODE == "kubelet":
            assert node["metadata"]["labels"].get("berthmaster.io/node") == "kubelet"


def test_two_schedulers_one_leader(kind: Kind) -> None:
    pods = scheduler_pods(kind)
    assert len(pods) == 2
    lease = kind.get("lease", SCHEDULER, "-n", NAMESPACE)
    holder = lease["spec"].get("holderIdentity")
    assert holder in {p["metadata"]["name"] for p in pods}


def test_the_other_replica_takes_over_when_the_leader_pod_is_deleted(kind: Kind,
                                                                     namespace: str) -> None:
    holder = kind.get("lease", SCHEDULER, "-n", NAMESPACE)["spec"]["holderIdentity"]
    kind.run("delete", "pod", holder, "-n", NAMESPACE, "--wait=false")

    def new_leader() -> str | None:
        now = kind.get("lease", SCHEDULER, "-n", NAMESPACE)["spec"].get("holderIdentity")
        alive = {p["metadata"]["name"] for p in scheduler_pods(kind)}
        return now if now and now != holder and now in alive else None

    leader = wait_for(new_leader, "another replica holding the lease", timeout=90)
    kind.apply((SAMPLES / "pods-custom-scheduler.yaml").read_text(), namespace)
    node_of(kind, namespace, "custom-scheduler-example")
    (event,) = wait_for(lambda: events(kind, namespace, "custom-scheduler-example", "Scheduled"),
                        "a Scheduled event")
    assert event["reportingInstance"] == leader
    # The Deployment brings the replica count back to two.
    wait_for(lambda: len([p for p in scheduler_pods(kind)
                          if p["status"].get("phase") == "Running"]) == 2,
             "two scheduler replicas again", timeout=120)


def test_dedicated_node_takes_only_its_group(kind: Kind, namespace: str) -> None:
    kind.apply((SAMPLES / "pods-dedicated.yaml").read_text(), namespace)
    dedicated = node_of(kind, namespace, "dedicated-group-pod")
    assert labels_of(kind, dedicated).get("dedicated") == "groupName"
    other = labels_of(kind, node_of(kind, namespace, "not-dedicated-pod"))
    assert "dedicated" not in other and "disktype" not in other


def test_special_hardware_pod_lands_on_the_ssd_node(kind: Kind, namespace: str) -> None:
    kind.apply((SAMPLES / "pods-special-hardware.yaml").read_text(), namespace)
    assert labels_of(kind, node_of(kind, namespace, "ssd-pod")).get("disktype") == "ssd"


def test_node_and_pod_affinity(kind: Kind, namespace: str) -> None:
    kind.apply((SAMPLES / "pods-affinity.yaml").read_text(), namespace)
    zone = "topology.kubernetes.io/zone"
    anchor = labels_of(kind, node_of(kind, namespace, "security-s1"))[zone]
    assert labels_of(kind, node_of(kind, namespace, "with-pod-affinity"))[zone] == anchor
    assert labels_of(kind, node_of(kind, namespace, "with-node-affinity"))[zone] in {
        "zone-a", "zone-b"}
    node_of(kind, namespace, "with-pod-antiaffinity")


def events(kind: Kind, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kind.items("events", "-n", namespace,
                                  "--field-selector", f"involvedObject.name={pod}")
            if e["reason"] == reason]


def test_scheduled_event_names_the_scheduler(kind: Kind, namespace: str) -> None:
    kind.apply((SAMPLES / "pods-custom-scheduler.yaml").read_text(), namespace)
    node = node_of(kind, namespace, "custom-scheduler-example")
    (event,) = wait_for(lambda: events(kind, namespace, "custom-scheduler-example", "Scheduled"),
                        "a Scheduled event")
    assert event["source"]["component"] == SCHEDULER
    assert event["message"] == (
        f"Successfully assigned {namespace}/custom-scheduler-example to {node}")


def test_unschedulable_pod_is_explained(kind: Kind, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nowhere"},
           "spec": {"schedulerName": SCHEDULER, "nodeSelector": {"zone": "zone-z"},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    kind.apply(yaml.safe_dump(pod), namespace)
    failed = wait_for(lambda: events(kind, namespace, "nowhere", "FailedScheduling"),
                      "a FailedScheduling event")
    total = len(kind.items("nodes"))
    assert failed[0]["message"].startswith(f"0/{total} nodes are available:")
    conditions = kind.get("pod", "nowhere", "-n", namespace)["status"]["conditions"]
    assert {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}.items() <= (
        next(c for c in conditions if c["type"] == "PodScheduled").items())


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def test_high_priority_pod_preempts_a_low_priority_one(kind: Kind, namespace: str) -> None:
    classes = [doc for doc in yaml.safe_load_all((SAMPLES / "pods-priority.yaml").read_text())
               if doc and doc["kind"] == "PriorityClass"]
    kind.apply(yaml.safe_dump_all(classes))
    target = next(n for n in workers(kind) if n["metadata"]["labels"].get("zone") == "zone-c")
    name = target["metadata"]["name"]
    share = millicores(target["status"]["allocatable"]["cpu"]) * 6 // 10

    def pod(pod_name: str, priority_class: str) -> str:
        return yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name},
            "spec": {"schedulerName": SCHEDULER, "priorityClassName": priority_class,
                     "nodeSelector": {"kubernetes.io/hostname": name},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": f"{share}m"}}}]}})

    kind.apply(pod("low", "berthmaster-sample-low"), namespace)
    assert node_of(kind, namespace, "low") == name
    kind.apply(pod("high", "berthmaster-sample-high"), namespace)
    wait_for(lambda: events(kind, namespace, "low", "Preempted"), "low preempted")
    wait_for(lambda: not kind.exists("pod", "low", "-n", namespace), "low deleted")
    assert node_of(kind, namespace, "high") == name
