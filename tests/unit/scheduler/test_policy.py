"""Policy files: the default and documented sample policies, and validation errors."""

from __future__ import annotations

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.policy import default_policy, load_policy

SEED_MODIFIED = """
kind: "Policy"
version: "v1"
"predicates": [
        {
            "name": "PodFitsResources"
        },
        {
            "name": "NoDiskConflict"
        },
        {
            "name": "MatchNodeSelector"
        },
        {
            "name": "HostName"
        },
        {
            "argument": {
                "serviceAffinity": {
                    "labels": [
                        "region"
                    ]
                }
            },
            "name": "Region"
        }
    ]
"priorities": [
        {
            "name": "LeastRequestedPriority",
            "weight": 1
        },
        {
            "name": "BalancedResourceAllocation",
            "weight": 1
        },
        {
            "name": "ServiceSpreadingPriority",
            "weight": 1
        },
        {
            "argument": {
                "serviceAntiAffinity": {
                    "label": "zone"
                }
            },
            "name": "Zone",
            "weight": 2
        }
    ]
"""

# the documented sample policies, verbatim (the "..." lines are their elisions)
SAMPLE_THREE_LEVELS = """kind: "Policy"
version: "v1"
predicates:
...
  - name: "RegionZoneAffinity"
    argument:
      serviceAffinity:
        labels:
          - "region"
          - "zone"
priorities:
...
  - name: "RackSpread"
    weight: 1
    argument:
      serviceAntiAffinity:
        label: "rack"
"""
SAMPLE_CITY = """kind: "Policy"
version: "v1"
predicates:
...
  - name: "CityAffinity"
    argument:
      serviceAffinity:
        labels:
          - "city"
priorities:
...
  - name: "BuildingSpread"
    weight: 1
    argument:
      serviceAntiAffinity:
        label: "building"
  - name: "RoomSpread"
    weight: 1
    argument:
      serviceAntiAffinity:
        label: "room"
"""
SAMPLE_LABELS = """kind: "Policy"
version: "v1"
predicates:
...
  - name: "RequireRegion"
    argument:
      labelsPresence:
        labels:
          - "region"
        presence: true
priorities:
...
  - name: "ZonePreferred"
    weight: 1
    argument:
      labelPreference:
        label: "zone"
        presence: true
"""
SAMPLE_COMBINED = """kind: "Policy"
version: "v1"
predicates:
...
  - name: "RegionAffinity"
    argument:
      serviceAffinity:
        labels:
          - "region"
  - name: "RequireRegion"
    argument:
      labelsPresence:
        labels:
          - "region"
        presence: true
  - name: "BuildingNodesAvoid"
    argument:
      labelsPresence:
        labels:
          - "building"
        presence: false
  - name: "PodFitsPorts"
  - name: "MatchNodeSelector"
priorities:
...
  - name: "ZoneSpread"
    weight: 2
    argument:
      serviceAntiAffinity:
        label: "zone"
  - name: "ZonePreferred"
    weight: 1
    argument:
      labelPreference:
        label: "zone"
        presence: true
  - name: "ServiceSpreadingPriority"
    weight: 1
"""


def test_default_policy_is_the_seeds():
    policy = default_policy()
    names = {p.name for p in policy.predicates}
    assert {"NoVolumeZoneConflict", "MaxEBSVolumeCount", "MaxGCEPDVolumeCount",
            "MaxAzureDiskVolumeCount", "MatchInterPodAffinity", "NoDiskConflict",
            "GeneralPredicates", "PodToleratesNodeTaints", "Region"} <= names
    weights = {p.name: p.weight for p in policy.priorities}
    assert weights == {"SelectorSpreadPriority": 1, "InterPodAffinityPriority": 1,
                       "LeastRequestedPriority": 1, "BalancedResourceAllocation": 1,
                       "NodePreferAvoidPodsPriority": 10000, "NodeAffinityPriority": 1,
                       "TaintTolerationPriority": 1, "Zone": 2}
    region = next(p for p in policy.predicates if p.name == "Region")
    assert region.labels == ["region"]


def test_seed_modified_policy():
    policy = load_policy(SEED_MODIFIED)
    assert [p.name for p in policy.priorities] == [
        "LeastRequestedPriority", "BalancedResourceAllocation", "ServiceSpreadingPriority",
        "Zone"]
    assert "CheckNodeUnschedulable" in {p.name for p in policy.predicates}


@pytest.mark.parametrize(("text", "predicates", "priorities"), [
    (SAMPLE_THREE_LEVELS, {"RegionZoneAffinity": ["region", "zone"]}, {"RackSpread": "rack"}),
    (SAMPLE_CITY, {"CityAffinity": ["city"]}, {"BuildingSpread": "building",
                                               "RoomSpread": "room"}),
    (SAMPLE_LABELS, {"RequireRegion": ["region"]}, {"ZonePreferred": "zone"}),
    (SAMPLE_COMBINED, {"RegionAffinity": ["region"], "RequireRegion": ["region"],
                       "BuildingNodesAvoid": ["building"]},
     {"ZoneSpread": "zone", "ZonePreferred": "zone"}),
])
def test_seed_sample_policies(text, predicates, priorities):
    policy = load_policy(text, "sample")
    by_name = {p.name: p for p in policy.predicates}
    for name, labels in predicates.items():
        assert by_name[name].labels == labels
    prio = {p.name: p for p in policy.priorities}
    for name, label in priorities.items():
        assert prio[name].label == label
    if "BuildingNodesAvoid" in by_name:
        assert by_name["BuildingNodesAvoid"].presence is False
        assert prio["ZoneSpread"].weight == 2
        assert "PodFitsPorts" in by_name


def test_json_and_label_list_form():
    policy = load_policy('{"kind": "Policy", "apiVersion": "v1", "predicates": [], "priorities": ['
                         '{"name": "RackSpread", "weight": 1, "argument": {"serviceAntiAffinity":'
                         ' {"label": ["rack"]}}}]}')
    assert policy.priorities[0].label == "rack"


def test_omitted_lists_fall_back_to_defaults():
    policy = load_policy("kind: Policy\napiVersion: v1\npriorities: []\n")
    assert len(policy.predicates) == len(default_policy().predicates)
    assert policy.priorities == ()


def test_every_problem_reported_with_its_location():
    text = """
kind: Policy
apiVersion: v2
predicates:
  - name: PodFitsResources
  - name: Foo
  - name: PodFitsResources
  - name: RequireRegion
    argument:
      labelsPresence: {presence: true}
  - name: Both
    argument:
      serviceAffinity: {labels: [a]}
      labelsPresence: {labels: [b]}
  - name: CheckNodeLabelPresence
priorities:
  - name: LeastRequestedPriority
    weight: 0
  - name: BalancedResourceAllocation
    weight: -2
  - name: EqualPriority
  - name: Spread
    weight: 1
    argument:
      serviceAntiAffinity: {}
  - name: Wrong
    weight: 1
    argument:
      labelsPresence: {labels: [x]}
"""
    with pytest.raises(PolicyError) as caught:
        load_policy(text, "policy.yaml")
    problems = caught.value.problems
    expected = [
        "apiVersion: must be 'v1'",
        "predicates[1].name: unknown predicate 'Foo'; known: ",
        "predicates[2].name: duplicate name 'PodFitsResources' (also predicates[0])",
        "predicates[3].argument.labelsPresence.labels: required",
        "predicates[4].argument: conflicting arguments serviceAffinity, labelsPresence",
        "predicates[5].argument: CheckNodeLabelPresence needs its labelsPresence argument",
        "priorities[0].weight: 0 must be a positive integer",
        "priorities[1].weight: -2 must be a positive integer",
        "priorities[2].weight: required",
        "priorities[3].argument.serviceAntiAffinity.label: required",
        "priorities[4].argument.labelsPresence: unknown priority argument (labelsPresence is a "
        "predicate argument)",
    ]
    for want in expected:
        assert any(p.startswith(want) for p in problems), (want, problems)
    assert len(problems) == len(expected)
    assert "policy.yaml" in str(caught.value)
    assert "PodFitsResources" in next(p for p in problems if "'Foo'" in p)


@pytest.mark.parametrize(("text", "fragment"), [
    ("[1, 2]", "must be an object with kind: Policy"),
    ("kind: Pod", "kind: must be 'Policy'"),
    ("kind: Policy\npredicates: {}", "predicates: must be a list"),
    ("kind: Policy\nextenders: [{urlPrefix: x}]", "extenders: scheduler extenders are not"),
    ("kind: Policy\nfoo: 1", "foo: unknown field"),
    ("kind: Policy\npredicates:\n  - {name: PodFitsResources, weight: 1}",
     "predicates[0].weight: unknown field"),
    ("kind: Policy\nkind2: [", "not JSON or YAML"),
])
def test_validation_errors(text, fragment):
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    assert any(fragment in p for p in caught.value.problems), caught.value.problems


def test_aliases_accepted():
    policy = load_policy('{"kind": "Policy", "predicates": [{"name": "NodeResourcesFit"}, '
                         '{"name": "TaintToleration"}, {"name": "InterPodAffinity"}], '
                         '"priorities": [{"name": "NodeResourcesLeastAllocated", "weight": 2}]}')
    assert {p.NAME for p in policy.predicates} >= {"PodFitsResources", "PodToleratesNodeTaints",
                                                   "MatchInterPodAffinity"}
    assert policy.priorities[0].NAME == "LeastRequestedPriority"
