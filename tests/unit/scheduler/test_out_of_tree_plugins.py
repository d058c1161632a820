"""Out-of-tree scheduler plugins: found through the ``berthmaster.plugins`` entry point group,
configured like in-tree ones (kube-scheduler 1.35: pkg/scheduler/apis/config/validation,
runtime/framework.go's expandMultiPointPlugins), and contained when they fail (runtime/
framework.go words a plugin's error: ``running "X" filter plugin: <err>``). Status codes carry
k8s.io/kube-scheduler@v0.35.4/framework/interface.go's names and numbers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler import framework
from berthmaster.scheduler.config import load_config
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.live import policy_file
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import out_of_tree
from berthmaster.scheduler.simulate import load_profile, simulate
from berthmaster.scheduler.snapshot import Snapshot
from berthmaster.scheduler.testing import profile_from_yaml, run_pod, snapshot_from_yaml
from tests.support import plugins
from tests.support.builders import make_node, make_pod

LICENSED = "licenses.example.com/matlab"


@pytest.fixture(autouse=True)
def installed(tmp_path: Path) -> Iterator[None]:
    with plugins.installed(tmp_path):
        yield


def _config(enabled: str, plugin_config: str = "") -> str:
    return ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"profiles:\n- plugins:\n    multiPoint:\n      enabled: [{enabled}]\n"
            + (f"  pluginConfig:\n{plugin_config}" if plugin_config else ""))


def _problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        load_config(text, "config.yaml")
    return list(caught.value.problems)


def _cluster() -> Snapshot:
    # the emptier node wins by default; only the busier one holds the license
    return Snapshot.build(nodes=[make_node("empty", cpu="8"),
                                 make_node("licensed", cpu="8", labels={LICENSED: "3"})],
                          pods=[make_pod("load", cpu="6", node_name="licensed")])


def _solver(**labels: str) -> dict[str, Any]:
    return make_pod("solver", cpu="100m",
                    labels={"licenses.example.com/product": "matlab", **labels})


def test_status_codes_are_upstreams() -> None:
    assert [(c.name, c.value) for c in framework.Code] == [
        ("Success", 0), ("Error", 1), ("Unschedulable", 2),
        ("UnschedulableAndUnresolvable", 3), ("Wait", 4), ("Skip", 5), ("Pending", 6)]
    assert framework.code_of(None) is framework.Code.Success
    assert framework.code_of(framework.unschedulable("x")) is framework.Code.Unschedulable
    assert framework.code_of(framework.unresolvable("x")) is \
        framework.Code.UnschedulableAndUnresolvable


def test_an_installed_plugin_changes_placement() -> None:
    assert Engine(seed=0).schedule(_solver(), _cluster()).node == "empty"
    profile = load_config(_config("{name: LicensedNodes}")).profiles[0]
    assert [p.name for p in profile.predicates][-1] == "LicensedNodes"
    assert Engine(profile, seed=0).schedule(_solver(), _cluster()).node == "licensed"


def test_points_order_and_weight_follow_the_profile_as_for_in_tree_plugins() -> None:
    text = _config("{name: LicensedNodes, weight: 7}").replace(
        "    multiPoint:", "    filter:\n      disabled: [{name: LicensedNodes}]\n"
        "    multiPoint:")
    profile = load_config(text).profiles[0]
    assert "LicensedNodes" not in [p.name for p in profile.predicates]
    weights = {p.name: p.weight for p in profile.priorities}
    assert weights["LicensedNodes"] == 7
    # a specific point's entry runs first there (expandMultiPointPlugins)
    first = load_config(_config("{name: LicensedNodes}").replace(
        "    multiPoint:", "    filter:\n      enabled: [{name: LicensedNodes}]\n"
        "    multiPoint:")).profiles[0]
    assert first.predicates[0].name == "LicensedNodes"


def test_a_plugin_without_a_point_is_refused_there() -> None:
    text = _config("{name: NodeName}").replace(
        "    multiPoint:\n      enabled: [{name: NodeName}]",
        "    filter:\n      enabled: [{name: RaisingScore}]")
    assert _problems(text) == [
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "RaisingScore": plugin '
        "'RaisingScore' does not extend FilterPlugin"]


def test_an_unknown_name_is_named_with_where_berthmaster_looked() -> None:
    [problem] = _problems(_config("{name: NoSuchPlugin}"))
    assert problem.startswith('profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: '
                              '"NoSuchPlugin": no such plugin in berthmaster; its plugins are: '
                              "Coscheduling, DefaultBinder, ")
    assert 'entry point group "berthmaster.plugins" of the packages installed in ' in problem
    assert str(plugins.EXAMPLE / "src") in problem
    assert problem.endswith("install the package that provides it (docs/plugins.md)")


@pytest.mark.parametrize(("name", "wanted"), [
    ("Unimportable", "the package providing plugin 'Unimportable' failed: loading "
     "'tests.support.no_such_module:PLUGIN': ModuleNotFoundError: No module named "
     "'tests.support.no_such_module'"),
    ("NotAPlugin", "the package providing plugin 'NotAPlugin' failed: "
     "'tests.support.plugins:NOT_A_PLUGIN' is a dict, not a "
     "berthmaster.scheduler.framework.PluginKind"),
])
def test_a_broken_package_is_reported_not_raised(name: str, wanted: str) -> None:
    [problem] = _problems(_config(f"{{name: {name}}}"))
    assert problem.startswith(f'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: '
                              f'"{name}": {wanted}')


def test_arguments_go_through_the_plugins_own_validation() -> None:
    config = ("  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n"
              "  - name: LicensedNodes\n"
              "    args: {kind: LicensedNodesArgs, minSeats: -1, licenseDomain: A_B, foo: 1}\n")
    assert _problems(_config("{name: LicensedNodes}", config)) == [
        'profiles[0].pluginConfig[1].args.foo: strict decoding error: unknown field "foo"; '
        "known fields: licenseDomain, minSeats",
        'profiles[0].pluginConfig[1].args.licenseDomain: Invalid value: "A_B": must be a DNS '
        "subdomain such as 'licenses.example.com' (lower case letters, digits, '-' and '.')",
        "profiles[0].pluginConfig[1].args.minSeats: Invalid value: -1: must be an integer of at "
        "least 1"]
    good = config.replace("minSeats: -1, licenseDomain: A_B, foo: 1", "minSeats: 4")
    profile = load_config(_config("{name: LicensedNodes}", good)).profiles[0]
    [licensed] = [p for p in profile.predicates if p.name == "LicensedNodes"]
    assert isinstance(licensed, out_of_tree.ContainedPredicate)
    assert licensed.inner.args == {"licenseDomain": "licenses.example.com", "minSeats": 4}
    # three seats are no longer enough: nothing fits, and preemption cannot help
    decision = Engine(profile).schedule(_solver(), _cluster())
    assert decision.message == ("0/2 nodes are available: 2 node(s) had no license for "
                                "matlab.")
    assert decision.unresolvable == {"empty", "licensed"}


@pytest.mark.parametrize(("plugin", "message"), [
    ("RaisingPreFilter", 'running PreFilter plugin "RaisingPreFilter": prefilter exploded'),
    ("RaisingFilter", "running \"RaisingFilter\" filter plugin: 'no table for empty'"),
    ("RaisingScore", 'plugin "RaisingScore" failed with: division by zero'),
    ("WildScore", 'plugin "WildScore" failed with: plugin "WildScore" returns an invalid '
     "score 1000, it should in the range of [0, 100] after normalizing"),
])
def test_a_failing_plugin_is_an_error_naming_it(plugin: str, message: str) -> None:
    profile = load_config(_config(f"{{name: {plugin}}}")).profiles[0]
    pod = make_pod("p", cpu="100m", labels={plugins.TRIGGER: "yes"})
    with pytest.raises(framework.PluginError) as caught:
        Engine(profile, seed=0).schedule(pod, _cluster())
    assert str(caught.value) == message
    assert caught.value.plugin == plugin


def test_a_raising_plugin_leaves_other_pods_alone() -> None:
    profile = load_config(_config("{name: RaisingFilter}")).profiles[0]
    assert Engine(profile, seed=0).schedule(make_pod("calm", cpu="1"), _cluster()).node


def test_contained_calls_are_timed_and_counted_with_upstream_labels() -> None:
    profile = load_config(_config("{name: LicensedNodes}")).profiles[0]
    durations: list[tuple[str, str, str]] = []
    evaluations: list[tuple[str, str]] = []
    count = out_of_tree.observe(
        profile.predicates, profile.priorities,
        out_of_tree.Observers(lambda p, e, s, _t: durations.append((p, e, s)),
                              lambda p, e: evaluations.append((p, e))))
    assert count == 2
    snapshot = Snapshot.build(nodes=[make_node("empty"), make_node("l1", labels={LICENSED: "1"}),
                                     make_node("l2", labels={LICENSED: "2"})])
    assert Engine(profile, seed=0).schedule(_solver(), snapshot).node == "l2"
    assert evaluations == [("LicensedNodes", "PreFilter"), ("LicensedNodes", "Filter"),
                           ("LicensedNodes", "Score")]
    assert set(durations) == {("LicensedNodes", "PreFilter", "Success"),
                              ("LicensedNodes", "Score", "Success"),
                              ("LicensedNodes", "Filter", "UnschedulableAndUnresolvable"),
                              ("LicensedNodes", "Filter", "Success")}
    # Filter's per-node calls are timed in one cycle of SAMPLE_EVERY (as upstream's 10%
    # sample), PreFilter and Score in every cycle
    filters = sum(1 for d in durations if d[1] == "Filter")
    assert filters == 3
    for _ in range(out_of_tree.SAMPLE_EVERY - 1):
        Engine(profile, seed=0).schedule(_solver(), snapshot)
    assert sum(1 for d in durations if d[1] == "Filter") == filters
    assert sum(1 for d in durations if d[1] == "PreFilter") == out_of_tree.SAMPLE_EVERY
    Engine(profile, seed=0).schedule(_solver(), snapshot)
    assert sum(1 for d in durations if d[1] == "Filter") == 2 * filters


def test_a_rejected_pod_waits_for_the_events_the_plugin_declared() -> None:
    profile = load_config(_config("{name: LicensedNodes}")).profiles[0]
    engine = Engine(profile)
    snapshot = Snapshot.build(nodes=[make_node("empty")])
    decision = engine.schedule(_solver(), snapshot)
    assert decision.rejected_by == {"LicensedNodes"}
    assert engine.unschedulable_events(decision) == {"Node/Add", "Node/UpdateNodeLabel"}
    assert engine.plugin_names(decision.rejected_by) == {"LicensedNodes"}


def test_the_kit_and_simulate_explain_show_the_plugins_verdicts() -> None:
    cluster = """
kind: List
apiVersion: v1
items:
- {apiVersion: v1, kind: Node, metadata: {name: a},
   status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: b, labels: {licenses.example.com/matlab: "2"}},
   status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
"""
    profile = profile_from_yaml(_config("{name: LicensedNodes}"))
    outcome = run_pod(_solver(), snapshot_from_yaml(cluster), profile)
    assert outcome.node == "b"
    assert outcome.filters["a"]["LicensedNodes"] == "node(s) had no license for matlab"
    assert outcome.filters["b"]["LicensedNodes"] == ""
    assert outcome.scores["b"]["LicensedNodes"] == 100
    [placement] = simulate(snapshot_from_yaml(cluster), [_solver()], Engine(profile),
                           explain=True)
    assert placement["nodes"]["a"]["predicates"]["LicensedNodes"] == \
        "node(s) had no license for matlab"
    assert placement["nodes"]["b"]["scores"]["LicensedNodes"] == 100


def test_simulate_reads_a_configuration_with_out_of_tree_plugins(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(_config("{name: LicensedNodes}"))
    profile = load_profile(str(path))
    assert "LicensedNodes" in [p.name for p in profile.priorities]
    policy = tmp_path / "policy.yaml"
    policy.write_text("kind: Policy\napiVersion: v1\npredicates: [{name: PodFitsResources}]\n")
    assert "PodFitsResources" in [p.name for p in load_profile(str(policy)).predicates]


def test_a_plugin_that_fails_to_initialise_is_reported_as_upstream_words_it() -> None:
    assert _problems(_config("{name: RaisingInit}")) == [
        'profiles[0].plugins: Invalid value: "RaisingInit": initializing plugin "RaisingInit": '
        "ValueError: cannot reach the license server"]


def test_two_packages_providing_one_name_is_an_error(tmp_path: Path) -> None:
    other = tmp_path / "other"
    plugins.write_distribution(other, "another-licensing", {"LicensedNodes": "other:PLUGIN"})
    with plugins.installed(tmp_path / "site", [other]):
        [problem] = _problems(_config("{name: LicensedNodes}"))
    assert problem == (
        'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "LicensedNodes": the '
        "package providing plugin 'LicensedNodes' failed: more than one installed package "
        "provides it: berthmaster-licensed-nodes (berthmaster_licensed_nodes:PLUGIN), "
        "another-licensing (other:PLUGIN); uninstall all but one")


def test_explain_reads_a_configuration_file_too(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(_config("{name: LicensedNodes}"))
    configured = policy_file(str(path))
    assert "LicensedNodes" in [p.name for p in configured.policy.predicates]


def test_a_queueing_hint_that_raises_requeues_on_any_event(caplog: Any) -> None:
    """A plugin whose ``events_for`` raises after rejecting a pod: the engine names no events
    (the daemon then requeues the pod on any event), logging the plugin's name — as upstream's
    queue requeues when a QueueingHintFn errs (pkg/scheduler/backend/queue/
    scheduling_queue.go, isPodWorthRequeuing)."""
    profile = load_config(_config("{name: RaisingHints}")).profiles[0]
    engine = Engine(profile)
    pod = make_pod("hintless", labels={plugins.HINTS_TRIGGER: "yes"})
    decision = engine.schedule(pod, _cluster())
    assert decision.node is None and "RaisingHints" in decision.rejected_by
    assert engine.unschedulable_events(decision, PodView.from_dict(pod)) == frozenset()
    assert [r.plugin for r in caplog.records if r.getMessage() == "queueing hint failed"] == [
        "RaisingHints"]
