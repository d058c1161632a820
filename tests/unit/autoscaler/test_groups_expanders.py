"""Node groups from MachineSets and Machines; the priority expander's ConfigMap."""

from __future__ import annotations

import random

import pytest

from berthmaster.operator.autoscaler.expanders import (
    EXPANDERS,
    Option,
    best_option,
    parse_priorities,
    read_priorities,
)
from berthmaster.operator.autoscaler.groups import build_cluster_view
from tests.unit.autoscaler.builders import make_machine, make_machine_set, make_node


def test_only_annotated_machinesets_are_groups_and_nodes_map_through_machines() -> None:
    view = build_cluster_view(
        [make_machine_set("auto", 3), make_machine_set("manual", 1, min_size=None, max_size=None)],
        [make_machine("m1", "auto", "n1"), make_machine("m2", "auto", None),
         make_machine("m3", "manual", "n3")],
        [make_node("n1"), make_node("n3")])
    assert [g.id for g in view.groups] == ["machines/auto"]
    group = view.groups[0]
    assert group.nodes == ("n1",)
    assert group.upcoming == 2  # m2 provisioning + one machine not even created yet
    assert view.node_group == {"n1": "machines/auto"}
    assert view.node_machine["n3"] == ("machines", "m3")


def test_deleting_machines_are_not_upcoming() -> None:
    view = build_cluster_view([make_machine_set("w", 1)],
                              [make_machine("m1", "w", "n1"),
                               make_machine("m2", "w", None, deleting=True)], [make_node("n1")])
    assert view.groups[0].upcoming == 0


@pytest.mark.parametrize(("low", "high", "problem"), [
    ("3", "2", "min size 3 is greater than max size 2"),
    ("x", "2", "is not a whole number"),
    ("-1", "2", "is negative"),
])
def test_bad_size_annotations_are_reported(low: str, high: str, problem: str) -> None:
    machine_set = make_machine_set("w", min_size=None, max_size=None, annotations={
        "machine.openshift.io/cluster-api-autoscaler-node-group-min-size": low,
        "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": high})
    view = build_cluster_view([machine_set], [], [])
    assert view.groups == ()
    assert problem in view.problems[0]


def test_priority_expander_picks_the_highest_matching_priority() -> None:
    view = build_cluster_view([make_machine_set("cheap-spot"), make_machine_set("steady")], [], [])
    options = [Option(g, 1, (), g.template or {}) for g in view.groups]
    priorities = parse_priorities({"priorities": "10:\n  - .*-spot\n1:\n  - .*\n"})
    chosen = best_option(options, ["Priority"], random.Random(0), priorities)
    assert chosen is not None and chosen.group.name == "cheap-spot"
    priorities = parse_priorities({"priorities": "50:\n  - machines/steady\n"})
    chosen = best_option(options, ["Priority"], random.Random(0), priorities)
    assert chosen is not None and chosen.group.name == "steady"


def test_priority_configmap_errors_name_the_configmap() -> None:
    reading = read_priorities({"data": {"priorities": "high:\n  - .*\n"}}, "berthmaster")
    assert reading.problem is not None
    assert "ConfigMap berthmaster/cluster-autoscaler-priority-expander" in reading.problem
    with pytest.raises(ValueError, match="priority 'high' is not an integer"):
        parse_priorities({"priorities": "high:\n  - .*\n"})


@pytest.mark.parametrize(("pattern", "wins"), [
    ("steady", "steady"),  # found anywhere in the id: an unanchored search
    ("^MachineSet/machines/steady$", "steady"),  # the whole node group id
    ("machines/steady", "steady"),
    ("ste", "steady"),
    ("^steady$", None),  # the id is not the bare name: nothing matches, no opinion
    ("^machines/steady$", None),
])
def test_priority_patterns_search_the_cluster_api_node_group_id(pattern: str,
                                                                wins: str | None) -> None:
    """cluster-autoscaler expander/priority priority.go ``groupIDMatchesList``
    (``FindStringIndex``: a match anywhere) against ``NodeGroup.Id()``, which the Cluster API
    provider makes ``MachineSet/<namespace>/<name>`` (clusterapi_unstructured.go ``ID``)."""
    view = build_cluster_view([make_machine_set("cheap-spot"), make_machine_set("steady")], [], [])
    options = [Option(g, 1, (), g.template or {}) for g in view.groups]
    priorities = parse_priorities({"priorities": f"50:\n  - '{pattern}'\n"})
    ranked = EXPANDERS["Priority"](options, random.Random(0), priorities)
    assert [o.group.name for o in ranked] == ([wins] if wins else ["cheap-spot", "steady"])
