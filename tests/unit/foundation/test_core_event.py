"""The core/v1 Event body: the fields client-go's legacy recorder sets
(staging/src/k8s.io/client-go/tools/record/event.go ``makeEvent``)."""

from __future__ import annotations

from datetime import UTC, datetime

from berthmaster.foundation.events import core_event, object_reference, stable_name

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MACHINE = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
           "metadata": {"name": "m", "namespace": "ns", "uid": "u1"}}


def test_object_reference_defaults_only_what_the_object_lacks() -> None:
    assert object_reference(MACHINE) == {"apiVersion": "machine.openshift.io/v1beta1",
                                         "kind": "Machine", "name": "m", "namespace": "ns",
                                         "uid": "u1"}
    assert object_reference({"metadata": {"name": "n"}}, kind="Node") == {
        "apiVersion": "v1", "kind": "Node", "name": "n", "namespace": None, "uid": None}


def test_stable_name_depends_on_uid_and_parts_only() -> None:
    name = stable_name(MACHINE, "DrainRequeued", "")
    assert name.startswith("m.") and len(name) == len("m.") + 12
    assert name == stable_name(dict(MACHINE), "DrainRequeued", "")
    assert name != stable_name(MACHINE, "DrainRequeued", "2")
    other = {"metadata": {**MACHINE["metadata"], "uid": "u2"}}  # type: ignore[dict-item]
    assert stable_name(other, "DrainRequeued", "") != name


def test_core_event_body() -> None:
    ref = object_reference(MACHINE)
    event = core_event(ref, name="m.x", namespace="ns", reason="R", message="msg",
                       event_type="Warning", component="c", instance="i", now=NOW, count=3)
    assert event == {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "m.x", "namespace": "ns"},
        "involvedObject": ref, "reason": "R", "message": "msg", "type": "Warning", "count": 3,
        "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:05Z",
        "source": {"component": "c"}, "reportingComponent": "c", "reportingInstance": "i"}
    with_action = core_event(ref, name="m.x", namespace="ns", reason="R", message="msg",
                             event_type="Normal", component="c", instance="i", now=NOW,
                             action="Binding", related=ref)
    assert (with_action["action"], with_action["related"]) == ("Binding", ref)
