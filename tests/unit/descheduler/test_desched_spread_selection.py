"""RemovePodsViolatingTopologySpreadConstraint's fast selection picks what the plain walk picks.

The strategy groups a namespace's pods by label set and matches a constraint's selector only
against the label sets holding its first ``In`` pair (``NamespacePods.selected``); upstream's
``RemovePodsViolatingTopologySpreadConstraint.Balance`` (pkg/framework/plugins/
removepodsviolatingtopologyspreadconstraint/topologyspreadconstraint.go) walks every pod of the
namespace and asks the selector of each. On random label sets and selectors of every operator,
both give the same pods in the same (listing) order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from berthmaster.scheduler.descheduler.strategies.topology_spread import NamespacePods
from berthmaster.scheduler.model import PodView, SpreadConstraint, label_selector
from tests.support.builders import make_pod

KEYS = ("app", "tier", "team")
VALUES = ("a", "b", "c")


def random_labels(rng: random.Random) -> dict[str, str]:
    return {key: rng.choice(VALUES) for key in KEYS if rng.random() < 0.7}


def random_selector(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.05:
        return None  # a null selector: matches nothing
    selector: dict[str, Any] = {}
    if rng.random() < 0.7:
        selector["matchLabels"] = {key: rng.choice(VALUES)
                                   for key in rng.sample(KEYS, rng.randint(1, 2))}
    expressions = []
    for _ in range(rng.randint(0, 2)):
        operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
        expression: dict[str, Any] = {"key": rng.choice(KEYS), "operator": operator}
        if operator in ("In", "NotIn"):
            expression["values"] = rng.sample(VALUES, rng.randint(1, 2))
        expressions.append(expression)
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


@pytest.mark.parametrize("seed", range(40))
def test_selected_is_the_plain_walk(seed: int) -> None:
    rng = random.Random(seed)
    views = [PodView.from_dict(make_pod(f"p{i}", "ns", labels=random_labels(rng),
                                        node_name=f"n{i % 3}"))
             for i in range(rng.randint(0, 60))]
    grouped = NamespacePods()
    for view in views:
        grouped.add(view)
    for _ in range(10):
        selector = label_selector(random_selector(rng))
        constraint = SpreadConstraint(1, "zone", "DoNotSchedule", selector, None, "Honor",
                                      "Ignore")
        plain = [view for view in views if selector.matches(view.labels)]
        assert grouped.selected(constraint) == plain
