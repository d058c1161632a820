"""PodTolerationRestriction's toleration algebra and its two passes, as upstream.

Tables follow pkg/util/tolerations/tolerations_test.go (TestIsSuperset, TestMergeTolerations,
TestVerifyAgainstWhitelist: the named tolerations and the named merge cases) and
plugin/pkg/admission/podtolerationrestriction/admission.go (Admit, Validate,
extractNSTolerations) for the namespace and cluster defaults and whitelists.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from berthmaster.operator.admission import podtolerationrestriction as ptr
from tests.support.builders import make_pod, toleration

T: dict[str, dict[str, Any]] = {
    "all": toleration(operator="Exists"),
    "all-nosched": toleration(operator="Exists", effect="NoSchedule"),
    "all-noexec": toleration(operator="Exists", effect="NoExecute"),
    "foo": toleration("foo", operator="Exists"),
    "foo-bar": toleration("foo", "bar", operator="Equal"),
    "foo-nosched": toleration("foo", operator="Exists", effect="NoSchedule"),
    "foo-bar-nosched": toleration("foo", "bar", "NoSchedule", "Equal"),
    "foo-baz-nosched": toleration("foo", "baz", "NoSchedule", "Equal"),
    "faz-nosched": toleration("faz", operator="Exists", effect="NoSchedule"),
    "faz-baz-nosched": toleration("faz", "baz", "NoSchedule", "Equal"),
    "foo-prefnosched": toleration("foo", operator="Exists", effect="PreferNoSchedule"),
    "foo-noexec": toleration("foo", operator="Exists", effect="NoExecute"),
    "foo-bar-noexec": toleration("foo", "bar", "NoExecute", "Equal"),
    "foo-noexec-10": toleration("foo", operator="Exists", effect="NoExecute", seconds=10),
    "foo-noexec-0": toleration("foo", operator="Exists", effect="NoExecute", seconds=0),
    "foo-bar-noexec-10": toleration("foo", "bar", "NoExecute", "Equal", seconds=10),
}


def named(*names: str) -> list[dict[str, Any]]:
    return [T[n] for n in names]


@pytest.mark.parametrize("broad,narrow,expected", [
    ("all", "foo-bar-nosched", True),
    ("all-nosched", "foo-bar-nosched", True),
    ("all-nosched", "foo-noexec", False),
    ("foo", "foo-bar-nosched", True),
    ("foo", "faz-nosched", False),
    ("foo-nosched", "foo-bar-nosched", True),
    ("foo-nosched", "foo-prefnosched", False),
    ("foo-bar", "foo-bar-nosched", True),
    ("foo-bar", "foo-baz-nosched", False),
    ("foo-bar-nosched", "foo-bar", False),
    ("foo-noexec-10", "foo-noexec-0", True),
    ("foo-noexec-0", "foo-noexec-10", False),
    ("foo-noexec-10", "foo-noexec", False),     # no seconds = forever: more than 10
    ("foo-noexec", "foo-noexec-10", True),
    ("foo-bar-noexec-10", "foo-bar-noexec-10", True),
    ("foo-bar-noexec", "foo-noexec", False),   # Equal never covers Exists
])
def test_is_superset(broad: str, narrow: str, expected: bool) -> None:
    assert ptr.is_superset(T[broad], T[narrow]) is expected


def test_an_empty_operator_is_equal_only_on_the_covering_side() -> None:
    """isSuperset: ``case Equal, ""`` for the broad one, ``t.Operator == Equal`` for the
    narrow one; only identical tolerations short-cut it."""
    bare = toleration("foo", "bar")
    assert ptr.is_superset(bare, T["foo-bar"])
    assert not ptr.is_superset(T["foo-bar"], bare)
    assert ptr.is_superset(bare, dict(bare))


@pytest.mark.parametrize("first,second,expected", [
    (("foo-bar-nosched", "faz-baz-nosched", "foo-noexec-10"),
     ("foo-prefnosched", "foo-baz-nosched"),
     ("foo-bar-nosched", "faz-baz-nosched", "foo-noexec-10", "foo-prefnosched",
      "foo-baz-nosched")),  # disjoint
    (("foo-bar-nosched", "faz-baz-nosched", "foo-noexec-10"),
     ("foo-bar-nosched", "faz-baz-nosched", "foo-noexec-10"),
     ("foo-bar-nosched", "faz-baz-nosched", "foo-noexec-10")),  # duplicate
    (("foo-bar-nosched", "foo-baz-nosched"), ("foo-nosched", "faz-baz-nosched"),
     ("foo-nosched", "faz-baz-nosched")),  # merge redundant
    (("foo-bar-nosched", "foo-baz-nosched", "foo-noexec-10"), ("all",), ("all",)),
    (("all",), ("foo-bar-nosched", "foo-baz-nosched", "foo-noexec-10"), ("all",)),
], ids=["disjoint", "duplicate", "merge redundant", "merge all", "merge into all"])
def test_merge_tolerations(first: tuple[str, ...], second: tuple[str, ...],
                           expected: tuple[str, ...]) -> None:
    assert ptr.merge_tolerations(named(*first), named(*second)) == named(*expected)


@pytest.mark.parametrize("tolerations,whitelist,expected", [
    ((), ("foo",), True),
    (("foo-bar-nosched",), (), True),
    (("foo-bar-nosched", "faz-nosched"), ("foo", "faz-nosched"), True),
    (("foo-bar-nosched", "faz-nosched"), ("foo",), False),
    (("foo-noexec-10",), ("foo-noexec-0",), False),
    (("foo-bar-noexec",), ("all-noexec",), True),
])
def test_verify_against_whitelist(tolerations: tuple[str, ...], whitelist: tuple[str, ...],
                                  expected: bool) -> None:
    assert ptr.verify_against_whitelist(named(*tolerations), named(*whitelist)) is expected


@pytest.mark.parametrize("annotations,expected", [
    ({}, None),
    ({ptr.DEFAULT_TOLERATIONS: ""}, []),
    ({ptr.DEFAULT_TOLERATIONS: "[]"}, []),
    ({ptr.DEFAULT_TOLERATIONS: json.dumps([T["foo-bar-nosched"]])}, [T["foo-bar-nosched"]]),
])
def test_namespace_tolerations(annotations: dict[str, str], expected: Any) -> None:
    assert ptr.namespace_tolerations(annotations, ptr.DEFAULT_TOLERATIONS) == expected


@pytest.mark.parametrize("text,problem", [
    ("{not json", "is not JSON"),
    ('{"key": "a"}', "must be a JSON list of tolerations"),
    ('[{"key": "a", "operator": "Maybe"}]', "toleration 0 has operator 'Maybe'"),
    ('[{"key": "a", "tolerationSeconds": "ten"}]', "tolerationSeconds that is not an integer"),
    ('[{"key": "a", "operator": "Exists", "value": "b"}]', "Exists takes no value"),
    ('[{"value": "b"}]', "has no key"),
    ('[{"key": "a", "colour": "red"}]', "unknown field(s) colour"),
])
def test_malformed_annotations_are_named(text: str, problem: str) -> None:
    with pytest.raises(ptr.TolerationsAnnotationError, match=ptr.DEFAULT_TOLERATIONS) as caught:
        ptr.namespace_tolerations({ptr.DEFAULT_TOLERATIONS: text}, ptr.DEFAULT_TOLERATIONS)
    assert problem in str(caught.value)


DEDICATED = toleration("dedicated", "groupName", "NoSchedule", "Equal")
MEMORY = ptr.MEMORY_PRESSURE_TOLERATION


def annotated(defaults: list[dict[str, Any]] | None = None,
              whitelist: list[dict[str, Any]] | None = None) -> dict[str, str]:
    out = {}
    if defaults is not None:
        out[ptr.DEFAULT_TOLERATIONS] = json.dumps(defaults)
    if whitelist is not None:
        out[ptr.TOLERATIONS_WHITELIST] = json.dumps(whitelist)
    return out


@pytest.mark.parametrize("case,pod,operation,annotations,settings,tolerations,refusal", [
    ("namespace default added on create", make_pod(), "CREATE", annotated([DEDICATED]),
     ptr.Settings(), [DEDICATED], None),
    ("not added on update", make_pod(), "UPDATE", annotated([DEDICATED]), ptr.Settings(),
     None, None),
    ("cluster default when the namespace has none", make_pod(), "CREATE", {},
     ptr.Settings(default=[DEDICATED]), [DEDICATED], None),
    ("an empty annotation overrides the cluster default", make_pod(), "CREATE",
     {ptr.DEFAULT_TOLERATIONS: ""}, ptr.Settings(default=[DEDICATED]), None, None),
    ("already tolerated: nothing added", make_pod(tolerations=[T["foo"]]), "CREATE",
     annotated([T["foo-bar-nosched"]]), ptr.Settings(), None, None),
    ("non-BestEffort pods get memory-pressure", make_pod(cpu="100m"), "UPDATE", {},
     ptr.Settings(), [MEMORY], None),
    ("memory-pressure after the defaults", make_pod(memory="1Gi"), "CREATE",
     annotated([DEDICATED]), ptr.Settings(), [DEDICATED, MEMORY], None),
    ("namespace whitelist refuses", make_pod(tolerations=[T["faz-nosched"]]), "CREATE",
     annotated(whitelist=[T["foo"]]), ptr.Settings(), None,
     "pod tolerations (possibly merged with namespace default tolerations) conflict with its "
     "namespace whitelist"),
    ("cluster whitelist refuses", make_pod(tolerations=[T["faz-nosched"]]), "CREATE", {},
     ptr.Settings(whitelist=[T["foo"]]), None,
     "pod tolerations (possibly merged with namespace default tolerations) conflict with its "
     "cluster whitelist"),
    ("namespace whitelist replaces the cluster's", make_pod(tolerations=[T["faz-nosched"]]),
     "CREATE", annotated(whitelist=[T["faz-nosched"]]), ptr.Settings(whitelist=[T["foo"]]),
     None, None),
    ("an empty namespace whitelist allows anything", make_pod(tolerations=[T["faz-nosched"]]),
     "CREATE", annotated(whitelist=[]), ptr.Settings(whitelist=[T["foo"]]), None, None),
    ("defaults are checked against the whitelist", make_pod(), "CREATE",
     annotated([DEDICATED], [T["foo"]]), ptr.Settings(), None,
     "pod tolerations (possibly merged with namespace default tolerations) conflict with its "
     "namespace whitelist"),
    ("the dedicated-node recipe", make_pod(), "CREATE",
     annotated([DEDICATED], [toleration("dedicated", operator="Exists")]), ptr.Settings(),
     [DEDICATED], None),
])
def test_admit(case: str, pod: dict[str, Any], operation: str, annotations: dict[str, str],
               settings: ptr.Settings, tolerations: list[dict[str, Any]] | None,
               refusal: str | None) -> None:
    outcome = ptr.admit(pod, operation, annotations, settings)
    assert (outcome.tolerations, outcome.refusal) == (tolerations, refusal), case
