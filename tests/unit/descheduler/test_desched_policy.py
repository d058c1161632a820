"""Policy files: the documented v1alpha1 sample (deploy/samples/descheduler-once.yaml),
v1alpha2 profiles, and validation that lists every problem."""

from __future__ import annotations

import textwrap

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.descheduler.policy import parse_policy, parse_policy_text
from berthmaster.scheduler.policy import load_policy as load_scheduler_policy

SEED_SAMPLE = textwrap.dedent('''
    apiVersion: "descheduler/v1alpha1"
    kind: "DeschedulerPolicy"
    strategies:
      "RemoveDuplicates":
         enabled: false
      "LowNodeUtilization":
         enabled: true
         params:
           nodeResourceUtilizationThresholds:
             thresholds:
               "cpu" : 20
               "memory": 20
               "pods": 20
             targetThresholds:
               "cpu" : 50
               "memory": 50
               "pods": 50
             numberOfNodes: 3
      "RemovePodsViolatingInterPodAntiAffinity":
         enabled: true
      "RemovePodsViolatingNodeAffinity":
        enabled: true
        params:
          nodeAffinityType:
          - "requiredDuringSchedulingIgnoredDuringExecution"
''')


def test_seed_sample_policy_is_read_unchanged() -> None:
    policy = parse_policy_text(SEED_SAMPLE)
    assert policy.api_version == "descheduler/v1alpha1"
    # deschedule strategies first, then balance ones; the disabled one is absent
    assert [s.name for s in policy.strategies] == [
        "RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingNodeAffinity",
        "LowNodeUtilization"]
    low = policy.strategies[2].params
    assert low.thresholds == {"cpu": 20, "memory": 20, "pods": 20}
    assert low.target_thresholds == {"cpu": 50, "memory": 50, "pods": 50}
    assert low.number_of_nodes == 3
    assert policy.strategies[1].params.node_affinity_type == (
        "requiredDuringSchedulingIgnoredDuringExecution",)
    # the evictor defaults protect everything upstream protects
    evictor = policy.strategies[0].evictor
    assert not evictor.evict_local_storage_pods and not evictor.evict_system_critical_pods


def test_v1alpha2_profiles_read_into_the_same_form() -> None:
    policy = parse_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": 2, "maxNoOfPodsToEvictTotal": 5,
        "profiles": [{
            "name": "p",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": True,
                                                    "nodeFit": True,
                                                    "priorityThreshold": {"value": 100}}},
                {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}},
                {"name": "RemoveDuplicates", "args": {"excludeOwnerKinds": ["Job"]}},
            ],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]},
                        "balance": {"enabled": ["RemoveDuplicates"]},
                        "filter": {"enabled": ["DefaultEvictor"]}},
        }],
    })
    assert [s.name for s in policy.strategies] == ["PodLifeTime", "RemoveDuplicates"]
    assert policy.strategies[0].params.max_pod_lifetime_seconds == 60
    assert policy.strategies[1].params.exclude_owner_kinds == ("Job",)
    evictor = policy.strategies[0].evictor
    assert evictor.evict_local_storage_pods and evictor.node_fit
    assert evictor.priority_threshold == 100
    assert (policy.max_pods_per_node, policy.max_pods_total) == (2, 5)


def test_v1alpha1_strategy_params_map_to_plugin_args() -> None:
    policy = parse_policy({
        "apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
        "evictLocalStoragePods": True, "maxNoOfPodsToEvictPerNamespace": 1,
        "strategies": {
            "PodLifeTime": {"enabled": True, "params": {
                "podLifeTime": {"maxPodLifeTimeSeconds": 86400, "podStatusPhases": ["Pending"]},
                "namespaces": {"include": ["a"]}, "nodeFit": True}},
            "RemovePodsViolatingTopologySpreadConstraint": {
                "enabled": True, "params": {"includeSoftConstraints": True,
                                            "thresholdPriorityClassName": "low"}},
            "RemovePodsHavingTooManyRestarts": {"enabled": True, "params": {
                "podsHavingTooManyRestarts": {"podRestartThreshold": 5,
                                              "includingInitContainers": True}}},
        },
    })
    by_name = {s.name: s for s in policy.strategies}
    lifetime = by_name["PodLifeTime"]
    assert lifetime.params.states == ("Pending",)
    assert lifetime.params.filter.namespaces.include == {"a"}
    assert lifetime.evictor.evict_local_storage_pods
    assert not lifetime.evictor.node_fit  # upstream ignores nodeFit for PodLifeTime
    spread = by_name["RemovePodsViolatingTopologySpreadConstraint"]
    assert spread.params.constraints == ("DoNotSchedule", "ScheduleAnyway")
    assert spread.evictor.priority_threshold_class == "low"
    assert by_name["RemovePodsHavingTooManyRestarts"].params.pod_restart_threshold == 5
    assert policy.max_pods_per_namespace == 1


def problems_of(document: dict) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document)
    return caught.value.problems


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of({
        "apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
        "strategies": {
            "RemoveDuplicate": {"enabled": True},
            "LowNodeUtilization": {"enabled": True, "params": {
                "nodeResourceUtilizationThresholds": {
                    "thresholds": {"cpu": 120, "memory": 60},
                    "targetThresholds": {"cpu": 50, "memory": 50}}}},
            "PodLifeTime": {"enabled": True, "params": {
                "namespaces": {"include": ["a"], "exclude": ["b"]}}},
            "RemovePodsViolatingNodeAffinity": {"enabled": True, "params": {
                "nodeAffinityType": ["requiredDuringScheduling"]}},
            "RemovePodsViolatingNodeTaints": {"enabled": True, "params": {
                "thresholdPriority": 10, "thresholdPriorityClassName": "x"}},
        },
    })
    text = "\n".join(problems)
    assert 'strategies["RemoveDuplicate"]: unknown strategy name' in text
    assert "cpu threshold not in [0, 100] range" in text
    assert "thresholds' memory percentage is greater than targetThresholds'" in text
    assert "MaxPodLifeTimeSeconds not set" in text
    assert "only one of Include/Exclude namespaces can be set" in text
    assert "invalid nodeAffinityType 'requiredDuringScheduling'" in text
    assert "only one of thresholdPriority and thresholdPriorityClassName can be set" in text
    assert "thresholds' cpu percentage is greater than targetThresholds'" in text
    assert len(problems) == 8


@pytest.mark.parametrize(("document", "expected"), [
    ({"apiVersion": "descheduler/v1beta9", "kind": "DeschedulerPolicy"}, "apiVersion: must be"),
    ({"apiVersion": "descheduler/v1alpha1", "kind": "Policy", "strategies": {
        "RemoveDuplicates": {"enabled": True}}}, "kind: must be 'DeschedulerPolicy'"),
    ({"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy"},
     "no strategy is configured"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"deschedule": {"enabled": ["LowNodeUtilization"]}},
         "pluginConfig": [{"name": "LowNodeUtilization", "args": {
             "thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 20}}}]}]},
     "LowNodeUtilization is a balance plugin; list it under plugins.balance.enabled"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}},
         "pluginConfig": [{"name": "HighNodeUtilization", "args": {
             "thresholds": {"cpu": 10}, "evictableNamespaces": {"include": ["a"]}}}]}]},
     "only Exclude namespaces can be set, inclusion is not supported"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
         "pluginConfig": [{"name": "RemovePodsViolatingNodeTaints", "args": {
             "excludedTaints": ["a"], "includedTaints": ["b"]}}]}]},
     "either includedTaints or excludedTaints can be set, but not both"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
         "pluginConfig": [{"name": "PodLifeTime", "args": {
             "maxPodLifeTimeSeconds": 5, "states": ["Sleeping"]}}]}]},
     "states must be one of"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"deschedule": {"enabled": ["RemovePodsHavingTooManyRestarts"]}},
         "pluginConfig": [{"name": "RemovePodsHavingTooManyRestarts", "args": {
             "podRestartThreshold": 0}}]}]},
     "invalid PodsHavingTooManyRestarts threshold"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"balance": {
            "enabled": ["RemovePodsViolatingTopologySpreadConstraint"]}},
         "pluginConfig": [{"name": "RemovePodsViolatingTopologySpreadConstraint", "args": {
             "constraints": ["Sometimes"]}}]}]},
     "constraint Sometimes is not one of"),
    ({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
         "pluginConfig": [{"name": "DefaultEvictor", "args": {"minPodAge": "soon"}},
                          {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 1}}]}]},
     "minPodAge: must be a duration"),
])
def test_invalid_policies_name_the_field_and_the_fix(document: dict, expected: str) -> None:
    assert any(expected in problem for problem in problems_of(document)), problems_of(document)


def test_policy_error_message_lists_each_problem() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy_text("apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n"
                          "strategies: {Nope: {enabled: true}}\n", source="policy.yaml")
    assert str(caught.value).startswith(
        "invalid descheduler policy policy.yaml: 1 problem(s):\n  - ")


def test_the_scheduler_and_descheduler_policies_raise_one_error_alike() -> None:
    """One PolicyError (berthmaster/foundation/errors.py), source first, problems second, in
    both."""
    with pytest.raises(PolicyError) as scheduler:
        load_scheduler_policy("kind: Pod", "sched.yaml")
    with pytest.raises(PolicyError) as descheduler:
        parse_policy_text("kind: Pod", source="desched.yaml")
    for caught, document, source in ((scheduler, "scheduler", "sched.yaml"),
                                     (descheduler, "descheduler", "desched.yaml")):
        assert caught.value.source == source
        assert caught.value.problems
        assert str(caught.value).startswith(f"invalid {document} policy {source}: ")


def test_not_yaml_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="not valid YAML"):
        parse_policy_text("a: [b", source="p.yaml")
