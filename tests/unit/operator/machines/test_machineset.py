"""MachineSet decisions: ownership, the Machine template, delete policies, status."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from berthmaster.operator.machines.machineset import (
    build_machine,
    build_status,
    machines_to_delete,
    newest_priority,
    oldest_priority,
    owned_machines,
    selector_string,
    validate,
)
from tests.unit.operator.machines.machine_builders import make_machine

NOW = datetime(2026, 1, 10, tzinfo=UTC)
LABELS = {"machine.openshift.io/cluster-api-machineset": "workers"}


def make_set(**spec: object) -> dict:
    return {"metadata": {"name": "workers", "namespace": "ns", "uid": "ms-uid", "generation": 3},
            "spec": {"replicas": 2, "selector": {"matchLabels": LABELS},
                     "template": {"metadata": {"labels": {**LABELS, "role": "w"}},
                                  "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
                     **spec}}


def names(machines: list[dict]) -> list[str]:
    return [m["metadata"]["name"] for m in machines]


def test_build_machine_from_template() -> None:
    machine = build_machine(make_set())
    assert machine["metadata"]["generateName"] == "workers-"
    assert machine["metadata"]["labels"] == {**LABELS, "role": "w"}
    assert machine["metadata"]["ownerReferences"] == [{
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "workers",
        "uid": "ms-uid", "controller": True, "blockOwnerDeletion": True}]
    assert machine["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]


def test_ownership_adopts_orphans_and_skips_others_and_deleting() -> None:
    machines = [make_machine("a", labels=LABELS, owner_uid="ms-uid"),
                make_machine("b", labels=LABELS),
                make_machine("c", labels=LABELS, owner_uid="other"),
                make_machine("d", labels=LABELS, owner_uid="ms-uid", deleting=True),
                make_machine("e", labels={"x": "y"})]
    counted, orphans = owned_machines(make_set(), machines)
    assert names(counted) == ["a", "b"] and names(orphans) == ["b"]


def test_validation_names_field_and_fix() -> None:
    """The delete-policy message is openshift/machine-api-operator
    pkg/controller/machineset/delete_policy.go getDeletePriorityFunc's current wording."""
    assert validate(make_set()) == []
    bad = make_set(selector={"matchLabels": {"other": "x"}}, deletePolicy="Smallest")
    problems = validate(bad)
    assert "unsupported delete policy Smallest, must be one of 'Random', 'Newest', or 'Oldest'" \
        in problems
    assert any("spec.template.metadata.labels: `selector` does not match template `labels`" in p
               for p in problems)
    assert "empty selector" in validate(make_set(selector={}))[0]


AGES = {"old": "2026-01-01T00:00:00Z", "mid": "2026-01-05T00:00:00Z",
        "new": "2026-01-09T00:00:00Z"}


def aged(name: str, **kw: object) -> dict:
    return make_machine(name, created=AGES[name], node=f"node-{name}", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("policy", "expected"), [("Oldest", ["old"]), ("Newest", ["new"])])
def test_age_policies(policy: str, expected: list[str]) -> None:
    machines = [aged("mid"), aged("old"), aged("new")]
    assert names(machines_to_delete(machines, 1, policy, NOW)) == expected


@pytest.mark.parametrize("policy", ["Random", "Newest", "Oldest"])
def test_delete_machine_annotation_first_in_every_policy(policy: str) -> None:
    marked = aged("mid", annotations={"machine.openshift.io/delete-machine": "true"})
    machines = [aged("old"), marked, aged("new")]
    assert names(machines_to_delete(machines, 1, policy, NOW)) == ["mid"]
    legacy = aged("mid", annotations={"machine.openshift.io/cluster-api-delete-machine": "yes"})
    assert names(machines_to_delete([aged("old"), legacy, aged("new")], 1, policy, NOW)) == ["mid"]


@pytest.mark.parametrize("policy", ["Oldest", "Newest"])
def test_delete_machine_annotation_outranks_any_age(policy: str) -> None:
    """openshift/machine-api-operator pkg/controller/machineset/delete_policy.go,
    oldestDeletePriority / newestDeletePriority: age maps onto
    ``betterDelete * (1 - exp(-age / secondsPerHundredDays))``, so it tends to 50 and never
    reaches the annotation's ``mustDelete`` (100). With the older ``mustDelete * (1 -
    exp(-age / ten days))`` a Machine about 400 days old scored exactly 100.0 (the exponential
    underflows), tied with the annotated one and, listed first, was deleted instead of it."""
    ancient = make_machine("ancient", created="2024-01-01T00:00:00Z", node="node-ancient")
    marked = aged("new", annotations={"machine.openshift.io/delete-machine": "true"})
    assert names(machines_to_delete([ancient, marked, aged("mid")], 1, policy, NOW)) == ["new"]


@pytest.mark.parametrize(("created", "oldest"), [
    ("2026-01-10T00:00:00Z", 0.0),                       # just created
    ("2025-10-02T00:00:00Z", 50.0 * (1 - math.exp(-1))),  # 100 days: 31.6
    ("2016-01-10T00:00:00Z", 50.0),                       # ten years: tends to betterDelete
    ("2026-01-11T00:00:00Z", 0.0),                        # created in the future: mustNotDelete
])
def test_age_priorities_are_upstreams(created: str, oldest: float) -> None:
    """delete_policy.go oldestDeletePriority (secondsPerHundredDays = 8640000) and
    newestDeletePriority (mustDelete minus it)."""
    machine = make_machine("m", created=created)
    assert oldest_priority(machine, NOW) == pytest.approx(oldest, abs=1e-9)
    assert newest_priority(machine, NOW) == pytest.approx(100.0 - oldest, abs=1e-9)


def test_unhealthy_machines_come_first() -> None:
    sick = aged("new", error_reason="InvalidConfiguration")
    assert names(machines_to_delete([aged("old"), sick], 1, "Oldest", NOW)) == ["new"]


def test_random_prefers_machines_without_nodes_then_is_random() -> None:
    nodeless = make_machine("x", created=AGES["mid"])
    machines = [aged("old"), nodeless, aged("new")]
    assert names(machines_to_delete(machines, 1, "Random", NOW, random.Random(1))) == ["x"]
    picks = {names(machines_to_delete([aged("old"), aged("mid"), aged("new")], 1, "Random", NOW,
                                      random.Random(seed)))[0] for seed in range(30)}
    assert picks == {"old", "mid", "new"}


def test_delete_count_bounds() -> None:
    machines = [aged("old"), aged("new")]
    assert machines_to_delete(machines, 0, "Oldest", NOW) == []
    assert names(machines_to_delete(machines, 5, "Oldest", NOW)) == ["old", "new"]


def test_status_counts_ready_nodes() -> None:
    ms = make_set()
    machines = [make_machine("a", labels={**LABELS, "role": "w"}, node="na"),
                make_machine("b", labels=LABELS, node="nb"), make_machine("c", labels=LABELS)]
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True",
                                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    status = build_status(ms, machines, {"na": ready, "nb": {"status": {}}}, NOW)
    assert status == {"replicas": 3, "fullyLabeledReplicas": 1, "readyReplicas": 1,
                      "availableReplicas": 1, "observedGeneration": 3,
                      "labelSelector": "machine.openshift.io/cluster-api-machineset=workers"}


def test_selector_string() -> None:
    assert selector_string({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
        {"key": "z", "operator": "In", "values": ["y", "x"]}, {"key": "e", "operator": "Exists"},
        {"key": "n", "operator": "DoesNotExist"}]}) == "a=1,b=2,z in (x,y),e,!n"
