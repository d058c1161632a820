"""The linear-time toleration merge and whitelist check change nothing: property tests against
the plain quadratic form of upstream's MergeTolerations and VerifyAgainstWhitelist
(k8s.io/kubernetes pkg/util/tolerations/tolerations.go), written here as upstream loops, on
random lists drawn from a small alphabet so that equal, covering and NoExecute-seconds cases
are frequent; and a pod of 5,000 tolerations merges (the old quadratic form took minutes).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from berthmaster.operator.admission import podtolerationrestriction as ptr

KEYS = ("", "foo", "bar")
OPERATORS = ("", "Equal", "Exists", "Odd")
VALUES = ("", "a", "b")
EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
SECONDS = (None, None, 0, 10, 20)


def plain_merge(first: Sequence[ptr.Toleration], second: Sequence[ptr.Toleration]
                ) -> list[ptr.Toleration]:
    everything = [*first, *second]
    merged: list[ptr.Toleration] = []
    for index, toleration in enumerate(everything):
        if any(ptr.is_superset(kept, toleration) for kept in merged):
            continue
        if any(ptr._fields(later) != ptr._fields(toleration) and ptr.is_superset(later, toleration)
               for later in everything[index + 1:]):
            continue
        merged.append(toleration)
    return merged


def plain_verify(tolerations: Sequence[ptr.Toleration], whitelist: Sequence[ptr.Toleration]
                 ) -> bool:
    if not whitelist or not tolerations:
        return True
    return all(any(ptr.is_superset(w, t) for w in whitelist) for t in tolerations)


def random_toleration(rng: random.Random) -> dict[str, Any]:
    toleration: dict[str, Any] = {}
    for name, choices in (("key", KEYS), ("operator", OPERATORS), ("value", VALUES),
                          ("effect", EFFECTS)):
        choice = rng.choice(choices)
        if choice:
            toleration[name] = choice
    seconds = rng.choice(SECONDS)
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return toleration


@pytest.mark.parametrize("seed", range(300))
def test_merge_is_upstreams(seed: int) -> None:
    rng = random.Random(seed)
    first = [random_toleration(rng) for _ in range(rng.randint(0, 8))]
    second = [random_toleration(rng) for _ in range(rng.randint(0, 4))]
    fast = ptr.merge_tolerations(first, second)
    plain = plain_merge(first, second)
    assert [id(t) for t in fast] == [id(t) for t in plain], (first, second)


@pytest.mark.parametrize("seed", range(300))
def test_whitelist_is_upstreams(seed: int) -> None:
    rng = random.Random(seed)
    tolerations = [random_toleration(rng) for _ in range(rng.randint(0, 6))]
    whitelist = [random_toleration(rng) for _ in range(rng.randint(0, 4))]
    assert ptr.verify_against_whitelist(tolerations, whitelist) == plain_verify(
        tolerations, whitelist), (tolerations, whitelist)


def test_five_thousand_distinct_tolerations_merge() -> None:
    pod = [{"key": f"k{i}", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
           for i in range(5000)]
    extra = [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
              "effect": "NoSchedule"}]
    merged = ptr.merge_tolerations(pod, extra)
    assert merged == [*pod, *extra]
    covering = ptr.merge_tolerations(pod, [{"operator": "Exists"}])
    assert covering == [{"operator": "Exists"}]
