"""The objects users see: Event and condition bodies with upstream's strings."""

from __future__ import annotations

from berthmaster.scheduler.daemon.binder import binding_body
from berthmaster.scheduler.daemon.events import (
    build_event,
    preempted_message,
    scheduled_message,
    unschedulable_status_patch,
)

POD = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "7"},
       "spec": {}}


def test_scheduled_message_is_upstreams() -> None:
    assert scheduled_message(POD, "node-a") == "Successfully assigned shop/web to node-a"


def test_preempted_message_names_the_preemptor_uid() -> None:
    assert preempted_message(POD, "node-a") == "Preempted by pod u-1 on node node-a"


def test_event_carries_source_and_reporting_component() -> None:
    event = build_event(POD, "Warning", "FailedScheduling", "0/3 nodes are available: ...",
                        "berthmaster", "host_1", "Scheduling")
    assert event["source"] == {"component": "berthmaster"}
    assert event["reportingComponent"] == "berthmaster"
    assert event["reportingInstance"] == "host_1"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "shop",
                                       "name": "web", "uid": "u-1", "resourceVersion": "7"}
    assert event["metadata"]["namespace"] == "shop"
    assert event["metadata"]["name"].startswith("web.")
    assert event["type"] == "Warning" and event["count"] == 1


def test_unschedulable_condition_patch() -> None:
    patch = unschedulable_status_patch("0/1 nodes are available: 1 Insufficient cpu.",
                                       nominated_node="n1")
    (condition,) = patch["status"]["conditions"]
    assert condition["type"] == "PodScheduled"
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert patch["status"]["nominatedNodeName"] == "n1"


def test_binding_names_the_pod_uid_as_precondition() -> None:
    body = binding_body(POD, "node-a")
    assert body["kind"] == "Binding"
    assert body["metadata"]["uid"] == "u-1"
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a"}
