"""The Priority expander's ConfigMap: RE2 patterns, the operator's namespace only, and a bad
ConfigMap that degrades to the next expander instead of stopping the loop.

Upstream: kubernetes/autoscaler cluster-autoscaler/expander/priority/priority.go
(``reloadConfigMap``, ``parsePrioritiesYAMLString``: the error texts below are its own;
``groupIDMatchesList``: an unanchored ``FindStringIndex`` with Go's RE2 ``regexp``).
"""

from __future__ import annotations

import random
import time

import pytest

from berthmaster.operator.autoscaler.config import DEFAULT_NAMESPACE, operator_namespace
from berthmaster.operator.autoscaler.expanders import (
    PRIORITY_CONFIGMAP,
    PRIORITY_CONFIGMAP_INVALID,
    PRIORITY_CONFIGMAP_NOT_FOUND,
    Option,
    PriorityConfigError,
    best_option,
    parse_priorities,
    read_priorities,
)
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.watches import priority_expander_configmap
from tests.unit.autoscaler.builders import make_machine_set


def configmap(priorities: str | None, namespace: str = "berthmaster") -> dict[str, object]:
    data = {} if priorities is None else {"priorities": priorities}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PRIORITY_CONFIGMAP, "namespace": namespace}, "data": data}


def options(*names: str, pods: dict[str, int] | None = None) -> list[Option]:
    view = build_cluster_view([make_machine_set(n) for n in names], [], [])
    counts = pods or {}
    return [Option(g, 1, tuple({"metadata": {"name": f"p{i}"}} for i in
                                range(counts.get(g.name, 1))), g.template or {})
            for g in view.groups]


@pytest.mark.timeout(10)
def test_a_catastrophic_pattern_matches_in_linear_time() -> None:
    """``(.+)+X`` against 60 characters that never end in X: Python's backtracking ``re``
    would try 2^60 splits; RE2, like Go's regexp, answers at once."""
    long_name = "a" * 60
    priorities = parse_priorities({"priorities": "10:\n  - '(.+)+X'\n  - '(a|aa)+$'\n"})
    started = time.monotonic()
    chosen = best_option(options(long_name, "steady"), ["Priority"], random.Random(0),
                         priorities)
    assert time.monotonic() - started < 1.0
    # (a|aa)+$ is found at the end of the long name's id: that group has priority 10
    assert chosen is not None and chosen.group.name == long_name


@pytest.mark.parametrize(("text", "problem"), [
    # reloadConfigMap / parsePrioritiesYAMLString's texts
    (None, "Wrong configmap for priority expander, doesn't contain priorities key"),
    ("", "priority configuration in cluster-autoscaler-priority-expander configmap is empty; "
         "please provide valid configuration"),
    ("10: [unclosed\n", "Can't parse YAML with priorities in the configmap: "),
    ("high:\n  - .*\n", "Can't parse YAML with priorities in the configmap: priority 'high' "
                        "is not an integer"),
    ("true:\n  - .*\n", "priority True is not an integer"),
    ("- 10\n- .*\n", "expected a map of integer priorities to lists of node group id regexes"),
    ("10:\n  a: b\n", "priority 10: expected a list of regexes"),
    ("10:\n  - 'a('\n", "Can't compile regexp rule for priority 10 and rule a(: missing ): a("),
    # valid for Python's re, refused by RE2 as by Go's regexp
    ("10:\n  - '(?<=spot)-a'\n", "Can't compile regexp rule for priority 10 and rule "
                                 "(?<=spot)-a: invalid perl operator: (?<="),
    ("10:\n  - '(spot)\\1'\n", "Can't compile regexp rule for priority 10 and rule (spot)\\1: "
                               "invalid escape sequence: \\1"),
    ("10:\n  - 'a{1001}'\n", "Can't compile regexp rule for priority 10 and rule a{1001}: "
                             "invalid repetition size: {1001}"),
])
def test_a_bad_configmap_names_itself_and_the_problem_and_has_no_priorities(
        text: str | None, problem: str) -> None:
    reading = read_priorities(configmap(text, "ops"), "ops")
    assert reading.priorities == {}
    assert reading.reason == PRIORITY_CONFIGMAP_INVALID
    assert reading.problem is not None
    assert reading.problem.startswith(f"ConfigMap ops/{PRIORITY_CONFIGMAP}")
    assert "priorities" in reading.problem
    assert problem in reading.problem
    assert "the next expander in spec.expanders decides" in reading.problem
    with pytest.raises(PriorityConfigError):
        parse_priorities(configmap(text)["data"])  # type: ignore[arg-type]


def test_a_missing_configmap_is_reported_with_the_namespace_it_was_looked_for_in() -> None:
    reading = read_priorities(None, "ops")
    assert reading.priorities == {}
    assert reading.reason == PRIORITY_CONFIGMAP_NOT_FOUND
    assert reading.problem is not None
    assert f"{PRIORITY_CONFIGMAP} not found in namespace ops" in reading.problem


@pytest.mark.parametrize("text", [None, "", "10: [\n", "10:\n  - '(?<=x)y'\n"])
def test_a_bad_configmap_leaves_the_choice_to_the_next_expander(text: str | None) -> None:
    """Upstream's BestOptions returns no option for a bad ConfigMap (no scale-up at all);
    berthmaster's Priority expander keeps every option and MostPods decides."""
    reading = read_priorities(configmap(text), "berthmaster")
    chosen = best_option(options("spot", "steady", pods={"steady": 3}),
                         ["Priority", "MostPods"], random.Random(0), reading.priorities)
    assert chosen is not None and chosen.group.name == "steady"


def test_a_good_configmap_decides_before_the_next_expander() -> None:
    reading = read_priorities(configmap("10:\n  - spot\n1:\n  - .*\n"), "berthmaster")
    assert reading.problem is None
    chosen = best_option(options("spot", "steady", pods={"steady": 3}),
                         ["Priority", "MostPods"], random.Random(0), reading.priorities)
    assert chosen is not None and chosen.group.name == "spot"


def test_yaml_scalars_are_patterns_and_an_empty_priority_is_allowed() -> None:
    """yaml.v2 decodes ``- 1`` into a string; a priority with no list has no patterns."""
    priorities = parse_priorities({"priorities": "10:\n  - 1\n5:\n"})
    assert sorted(priorities) == [5, 10]
    assert priorities[5] == []
    assert priorities[10][0].search("MachineSet/ns/pool-1") is not None


def test_the_configmap_is_watched_in_the_operators_namespace_only() -> None:
    resource = priority_expander_configmap("ops")
    assert resource.path == "/api/v1/namespaces/ops/configmaps"
    assert resource.field_selector == f"metadata.name={PRIORITY_CONFIGMAP}"


def test_the_operators_namespace_is_the_flag_then_pod_namespace_then_berthmaster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert operator_namespace() == DEFAULT_NAMESPACE == "berthmaster"
    monkeypatch.setenv("POD_NAMESPACE", "from-downward-api")
    assert operator_namespace() == "from-downward-api"
    assert operator_namespace("from-flag") == "from-flag"
