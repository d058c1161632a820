"""KubeSchedulerConfiguration: defaults, plugin merging, validation, and the default profile's
node choice.

Upstream: pkg/scheduler/apis/config/v1/default_plugins.go (getDefaultPlugins, mergePluginSet),
apis/config/v1/defaults.go, apis/config/validation/validation.go and validation_pluginargs.go,
framework/runtime/framework.go (expandMultiPointPlugins).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.config import default_profile, load_config
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.plugins import resource_allocation
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, taint


def _config(text: str) -> Any:
    return load_config(textwrap.dedent(text), "test.yaml")


def _problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        _config(text)
    return caught.value.problems


def test_the_default_profile_is_kube_scheduler_135s() -> None:
    profile = default_profile()
    assert profile.scheduler_name == "berthmaster"
    assert [p.name for p in profile.predicates] == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
        "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
        "VolumeZone", "PodTopologySpread", "InterPodAffinity"]
    assert [(p.name, p.weight) for p in profile.priorities] == [
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2), ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1)]
    assert profile.preemption


def test_a_prefer_no_schedule_taint_outweighs_free_cpu() -> None:
    """Node a is empty but tainted spot=true:PreferNoSchedule; node b has 3.5 of its 4 CPUs
    requested. kube-scheduler 1.35 picks b: TaintToleration 100 x 3 against 0 outweighs what
    LeastAllocated and BalancedAllocation give a."""
    nodes = [make_node("a", cpu="4", memory="8Gi",
                       taints=[taint("spot", "true", "PreferNoSchedule")]),
             make_node("b", cpu="4", memory="8Gi")]
    existing = [make_pod("busy", cpu="3500m", memory="1Gi", node_name="b")]
    pod = make_pod("p", cpu="500m", memory="512Mi")
    decision = Engine(seed=1).schedule(pod, Snapshot.build(nodes=nodes, pods=existing),
                                       explain=True)
    assert decision.node == "b"
    a, b = decision.priority_scores["a"], decision.priority_scores["b"]
    assert (a["TaintToleration"], b["TaintToleration"]) == (0, 100)
    # least allocated: a cpu (4000-500)*100/4000 = 87, memory (8192-512)*100/8192 = 93 -> 90;
    # b cpu 0, memory (8192-1536)*100/8192 = 81 -> 40
    assert (a["NodeResourcesFit"], b["NodeResourcesFit"]) == (90, 40)
    # balanced: a 1/8 and 1/16 -> (1 - 1/32) * 100 = 96; b 1 and 3/16 -> 59
    assert (a["NodeResourcesBalancedAllocation"], b["NodeResourcesBalancedAllocation"]) == \
        (96, 59)
    assert decision.scores == {"a": 90 + 96, "b": 300 + 40 + 59}


def test_two_profiles_with_their_own_strategies() -> None:
    config = _config("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        percentageOfNodesToScore: 50
        profiles:
        - schedulerName: spread
        - schedulerName: pack
          plugins:
            score:
              disabled: [{name: "*"}]
              enabled: [{name: NodeResourcesFit, weight: 5}]
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: MostAllocated
                resources: [{name: cpu, weight: 3}, {name: memory, weight: 1}]
        """)
    spread, pack = config.profiles
    assert config.scheduler_names == ("spread", "pack")
    assert config.percentage_of_nodes_to_score == 50
    assert len(spread.priorities) == 7
    (fit,) = pack.priorities
    assert (fit.name, fit.weight, fit.strategy, fit.resources) == \
        ("NodeResourcesFit", 5, "MostAllocated", (("cpu", 3), ("memory", 1)))
    # filters are untouched by a score-only change
    assert [p.name for p in pack.predicates] == [p.name for p in spread.predicates]


def test_merging_keeps_the_default_order_and_appends() -> None:
    """mergePluginSet: a re-configured default keeps its place; disabled ones go; new ones
    are appended; a specific extension point's entry runs before MultiPoint's."""
    config = _config("""
        profiles:
        - schedulerName: x
          plugins:
            multiPoint:
              enabled: [{name: NodeAffinity, weight: 7}]
              disabled: [{name: ImageLocality}, {name: DefaultPreemption}]
            filter:
              enabled: [{name: InterPodAffinity}]
        """)
    (profile,) = config.profiles
    names = [p.name for p in profile.predicates]
    assert names[0] == "InterPodAffinity" and names.count("InterPodAffinity") == 1
    assert dict((p.name, p.weight) for p in profile.priorities)["NodeAffinity"] == 7
    assert "ImageLocality" not in {p.name for p in profile.priorities}
    assert not profile.preemption


@pytest.mark.parametrize(("text", "wanted"), [
    ("percentageOfNodesToScore: 101",
     "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"),
    ("podInitialBackoffSeconds: 0",
     "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"),
    ("podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2",
     "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to "
     "PodInitialBackoffSeconds"),
    ("profiles: [{schedulerName: a}, {schedulerName: a}]",
     'profiles[1].schedulerName: Duplicate value: "profiles[0].schedulerName"'),
    ("profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
     "{scoringStrategy: {type: Fancy}}}]}]",
     'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Fancy": '
     'supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'),
    ("profiles: [{schedulerName: a, plugins: {score: {enabled: [{name: ImageLocality}, "
     "{name: NodePorts}]}}}]",
     "profiles[0].plugins.score.enabled[1].name: Invalid value: \"NodePorts\": plugin "
     "'NodePorts' does not extend ScorePlugin"),
    ("profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, args: "
     "{hardPodAffinityWeight: 101}}]}]",
     "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in "
     "valid range [0, 100]"),
    ("profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, args: "
     "{defaultingType: System, defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
     "whenUnsatisfiable: DoNotSchedule}]}}]}]",
     'profiles[0].pluginConfig[0].args.defaultingType: Invalid value: "System": when '
     ".defaultConstraints are not empty"),
    ("profiles: [{schedulerName: a, plugins: {filter: {enabled: [{name: Licence}]}}}]",
     'profiles[0].plugins.filter.enabled[0].name: Invalid value: "Licence": no such plugin '
     "in berthmaster; its plugins are: Coscheduling, DefaultBinder, DefaultPreemption"
     ", ImageLocality"),
    ("profile: []",
     'profile: strict decoding error: unknown field "profile"'),
    ("leaderElection: {leaseDuration: 5s, renewDeadline: 10s}",
     'leaderElection.leaseDuration: Invalid value: "5s": LeaseDuration must be greater than '
     "RenewDeadline"),
])
def test_a_bad_file_names_the_field(text: str, wanted: str) -> None:
    problems = _problems(text)
    assert any(p.startswith(wanted) for p in problems), problems


def test_resources_are_defaulted_before_they_are_validated() -> None:
    """apis/config/v1/defaults.go: an empty ``resources`` list is cpu and memory (both
    SetDefaults_NodeResourcesFitArgs and SetDefaults_NodeResourcesBalancedAllocationArgs),
    and a weight left out or 0 is 1 (kube-scheduler 1.35 loads this file)."""
    config = _config("""
        profiles:
        - schedulerName: a
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: MostAllocated
                resources: [{name: cpu}, {name: memory, weight: 0}, {name: example.com/gpu,
                            weight: 4}]
          - name: NodeResourcesBalancedAllocation
            args: {resources: [{name: cpu, weight: 0}, {name: example.com/gpu}]}
        - schedulerName: b
          pluginConfig:
          - name: NodeResourcesFit
            args: {scoringStrategy: {type: LeastAllocated, resources: []}}
          - name: NodeResourcesBalancedAllocation
            args: {resources: []}
        """)
    by_name = [{p.name: p for p in profile.priorities} for profile in config.profiles]
    assert by_name[0]["NodeResourcesFit"].resources == (
        ("cpu", 1), ("memory", 1), ("example.com/gpu", 4))
    assert by_name[0]["NodeResourcesBalancedAllocation"].resources == (
        ("cpu", 1), ("example.com/gpu", 1))
    assert by_name[1]["NodeResourcesFit"].resources == resource_allocation.DEFAULT_RESOURCES
    assert by_name[1]["NodeResourcesBalancedAllocation"].resources == \
        resource_allocation.DEFAULT_RESOURCES


def test_a_resource_weight_over_100_is_refused_in_upstreams_words() -> None:
    """apis/config/validation/validation_pluginargs.go, validateResources."""
    problems = _problems("""
        profiles:
        - schedulerName: a
          pluginConfig:
          - name: NodeResourcesFit
            args: {scoringStrategy: {resources: [{name: cpu, weight: 101}]}}
        """)
    # a scoringStrategy without type is not defaulted (defaults.go defaults a missing
    # scoringStrategy only): both problems, as ValidateNodeResourcesFitArgs collects them
    assert problems == ["profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported "
                        'value: "": supported values: "LeastAllocated", "MostAllocated", '
                        '"RequestedToCapacityRatio"',
                        "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: "
                        "Invalid value: 101: resource weight of cpu not in valid range "
                        "(0, 100]"]


def test_requested_to_capacity_ratio_shape() -> None:
    """requested_to_capacity_ratio.go: the shape scaled to 0..100; only positive scores
    count toward the weighted average, rounded."""
    config = _config("""
        profiles:
        - schedulerName: r
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: RequestedToCapacityRatio
                resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
                requestedToCapacityRatio:
                  shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
        """)
    fit = next(p for p in config.profiles[0].priorities if p.name == "NodeResourcesFit")
    nodes = [make_node("a", cpu="4", memory="4Gi")]
    snapshot = Snapshot.build(nodes=nodes)
    from berthmaster.scheduler.model import PodView

    # cpu 1000/4000 -> 25, memory 1Gi/4Gi -> 25
    assert fit.scores(PodView.from_dict(make_pod("p", cpu="1", memory="1Gi")), snapshot,
                      snapshot.node_list()) == [25]


@pytest.mark.parametrize(("fractions", "want"), [
    ([0.5, 0.5], 100), ([1.0, 0.0], 50), ([2.0, 0.0], 50), ([0.2, 0.4, 0.9], 70), ([], 100)])
def test_balanced_allocation_is_one_minus_the_standard_deviation(fractions: list[float],
                                                                want: int) -> None:
    assert resource_allocation.balanced(fractions) == want


@pytest.mark.parametrize(("a", "b", "want"), [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3)])
def test_go_division_truncates_toward_zero(a: int, b: int, want: int) -> None:
    assert resource_allocation.go_div(a, b) == want


def test_a_best_effort_pod_skips_balanced_allocation() -> None:
    """balanced_allocation.go, PreScore: no request of any configured resource -> Skip."""
    snapshot = Snapshot.build(nodes=[make_node("a"), make_node("b")])
    from berthmaster.scheduler.model import PodView

    pod = PodView.from_dict(make_pod("p", cpu=None, memory=None))
    assert resource_allocation.BalancedAllocation().scores(pod, snapshot,
                                                           snapshot.node_list()) == 0


def test_listed_do_not_schedule_default_constraints_filter() -> None:
    """podtopologyspread/plugin.go, getConstraints: a pod without constraints of its own gets
    the profile's defaults at Filter too (filtering.go, calPreFilterState), with the selector
    of the Service that selects it (common.go, buildDefaultConstraints); a node without the
    key fails as "missing required label"."""
    config = _config("""
        profiles:
        - schedulerName: spread
          pluginConfig:
          - name: PodTopologySpread
            args:
              defaultingType: List
              defaultConstraints:
              - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone,
                 whenUnsatisfiable: DoNotSchedule}
        """)
    zone = "topology.kubernetes.io/zone"
    nodes = [make_node("a", labels={zone: "a"}), make_node("b", labels={zone: "b"}),
             make_node("bare")]
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "default"},
               "spec": {"selector": {"app": "web"}}}
    existing = [make_pod("w1", labels={"app": "web"}, node_name="a")]
    snapshot = Snapshot.build(nodes=nodes, pods=existing, services=[service])
    engine = Engine(config.profiles[0])
    web = make_pod("w2", labels={"app": "web"})
    assert engine.schedule(web, snapshot).node == "b"
    assert not engine.fits(web, "a", snapshot)  # skew 2 - 0 > 1
    assert not engine.fits(web, "bare", snapshot)  # no zone label
    # nothing selects this pod: no default constraint applies
    lone = make_pod("lone", labels={"app": "db"})
    assert all(engine.fits(lone, node, snapshot) for node in ("a", "b", "bare"))
    # the default profile (System defaults, all ScheduleAnyway) filters nothing
    assert Engine(default_profile()).fits(web, "bare", snapshot)


def test_added_affinity_filters_and_scores_every_pod() -> None:
    """NodeAffinityArgs.addedAffinity (nodeaffinity/node_affinity.go): its required terms
    filter every pod of the profile as if the pod had them too (the pod's own reason), its
    preferred terms score beside the pod's own."""
    config = _config("""
        profiles:
        - schedulerName: a
          pluginConfig:
          - name: NodeAffinity
            args:
              addedAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  nodeSelectorTerms:
                  - matchExpressions: [{key: pool, operator: In, values: [batch, web]}]
                preferredDuringSchedulingIgnoredDuringExecution:
                - weight: 10
                  preference:
                    matchExpressions: [{key: pool, operator: In, values: [web]}]
        """)
    nodes = [make_node("batch", labels={"pool": "batch"}), make_node("web", labels={"pool": "web"}),
             make_node("other", labels={"pool": "db"})]
    decision = Engine(config.profiles[0], seed=0).schedule(
        make_pod("p"), Snapshot.build(nodes=nodes), explain=True)
    assert decision.node == "web"
    assert decision.reasons == {"other": ["node(s) didn't match Pod's node affinity/selector"]}
    scores = decision.priority_scores
    assert (scores["web"]["NodeAffinity"], scores["batch"]["NodeAffinity"]) == (100, 0)
    problems = _problems("""
        profiles:
        - schedulerName: a
          pluginConfig:
          - name: NodeAffinity
            args:
              addedAffinity:
                requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}
        """)
    assert problems[0].startswith("profiles[0].pluginConfig[0].args.addedAffinity."
                                  "requiredDuringSchedulingIgnoredDuringExecution."
                                  "nodeSelectorTerms: Required value")


def test_volume_binding_shape_is_refused_as_with_the_gate_off() -> None:
    """kube-scheduler 1.35 keeps VolumeBinding's capacity score behind the alpha gate
    StorageCapacityScoring (pkg/features/kube_features.go: off by default); with it off,
    validation_pluginargs.go refuses any ``shape``. The text is what kube-scheduler 1.35 prints
    for this very file."""
    problems = _problems("""
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: KubeSchedulerConfiguration
            profiles:
            - schedulerName: x
              pluginConfig:
              - name: VolumeBinding
                args:
                  bindTimeoutSeconds: 5
                  shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]
            """)
    assert problems == ['profiles[0].pluginConfig[0].args.shape: Invalid value: [{"Utilization":0,'
            '"Score":10},{"Utilization":100,"Score":0}]: unexpected field `shape`, remove it '
            'or turn on the feature gate StorageCapacityScoring']
