"""`berthmaster explain pod` without a cluster: its pure parts.

The command's answer is ``simulate``'s own placement entry for the one pod (upstream's
kube-scheduler has no such command; its per-node reasons are the FitError of
pkg/scheduler/schedule_one.go ``schedulePod``/``findNodesThatFitPod``, which the engine mirrors).
The live-cluster half is tested on the real API server in tests/integration/cli/test_explain.py.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

from berthmaster.cli import main
from berthmaster.foundation.errors import ConfigurationError
from berthmaster.scheduler.daemon.cache import RESOURCES
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.explain import as_pending, explain, pod_reference
from berthmaster.scheduler.live import as_snapshot_object, policy_from_configmap, save_snapshot
from berthmaster.scheduler.simulate import Source, build_inputs, load_inputs, simulate
from tests.support.builders import make_node, make_pod

GROUP = {"zone": "a"}
POLICY = ('{"kind": "Policy", "apiVersion": "v1", "predicates": [{"name": "PodFitsResources"}],'
          ' "priorities": [{"name": "LeastRequestedPriority", "weight": 1}]}')


def cluster(*pods: dict[str, Any]) -> list[dict[str, Any]]:
    return [make_node("big", cpu="2", labels=GROUP), make_node("small", cpu="1", labels=GROUP),
            make_node("other", cpu="8"), *pods]


@pytest.mark.parametrize(("text", "namespace", "expected"), [
    ("team/web", "default", ("team", "web")),
    ("web", "team", ("team", "web")),
    ("web", "default", ("default", "web")),
])
def test_pod_reference(text: str, namespace: str, expected: tuple[str, str]) -> None:
    assert pod_reference(text, namespace) == expected


@pytest.mark.parametrize("text", ["", "/web", "team/", "a/b/c"])
def test_pod_reference_refused(text: str) -> None:
    with pytest.raises(ConfigurationError, match="is not a pod reference; give NAMESPACE/NAME"):
        pod_reference(text, "default")


def test_a_bound_pod_is_explained_without_its_own_placement() -> None:
    """Counted on its node, the pod would compete with itself: 1500m of big's 2 CPUs."""
    bound = make_pod("web", cpu="1500m", node_selector=GROUP, node_name="big",
                     scheduler_name="berthmaster")
    answer = explain(cluster(bound), bound, Engine(seed=0))
    assert answer.placement["node"] == "big"
    nodes = answer.placement["nodes"]
    assert nodes["big"]["fits"] is True and "total" in nodes["big"]
    assert nodes["small"]["predicates"]["NodeResourcesFit"] == "Insufficient cpu"
    assert nodes["other"]["predicates"]["NodeAffinity"] == \
        "node(s) didn't match Pod's node affinity/selector"
    assert answer.notes == ["pod default/web is bound to node big; explained as if it were "
                            "pending (its own placement is not counted)"]
    assert bound["spec"]["nodeName"] == "big"  # the caller's object is left as it was


def test_a_pod_that_fits_nowhere() -> None:
    pending = make_pod("huge", cpu="4", node_selector=GROUP, scheduler_name="berthmaster")
    answer = explain(cluster(pending), pending, Engine(seed=0))
    placement = answer.placement
    assert placement["node"] is None and placement["nominatedNode"] is None
    assert placement["message"].startswith(
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu.")
    assert {n: i["fits"] for n, i in placement["nodes"].items()} == \
        {"big": False, "small": False, "other": False}
    assert answer.notes == []


def test_explain_agrees_with_simulate_explain() -> None:
    """Same objects, same engine seed: explain's entry is simulate --explain's entry."""
    running = make_pod("db", cpu="500m", node_name="big")
    pending = make_pod("web", cpu="600m", node_selector=GROUP, scheduler_name="berthmaster",
                       created="2026-01-01T00:00:00Z")
    objects = cluster(running, pending)
    snapshot, queue = build_inputs([Source("objects", objects)])
    (simulated,) = simulate(snapshot, queue, Engine(seed=0), explain=True)
    assert explain(objects, pending, Engine(seed=0)).placement == simulated


@pytest.mark.parametrize(("pod_scheduler", "ours", "notes"), [
    ("default-scheduler", "berthmaster", ["pod default/web has schedulerName default-scheduler, "
                                          "so berthmaster does not schedule it; explained as if "
                                          "it did"]),
    (None, "berthmaster", ["pod default/web has schedulerName default-scheduler, so berthmaster "
                           "does not schedule it; explained as if it did"]),
    ("berthmaster", "berthmaster", []),
    ("placer", "placer", []),
])
def test_another_schedulers_pod_is_explained_as_ours(pod_scheduler: str | None, ours: str,
                                                     notes: list[str]) -> None:
    assert as_pending(make_pod("web", scheduler_name=pod_scheduler), ours)[1] == notes


@pytest.mark.parametrize(("kind", "api_version"), [
    ("Node", "v1"), ("ReplicaSet", "apps/v1"), ("PodDisruptionBudget", "policy/v1"),
    ("PriorityClass", "scheduling.k8s.io/v1"), ("CSINode", "storage.k8s.io/v1"),
])
def test_listed_items_get_kind_and_api_version(kind: str, api_version: str) -> None:
    resource = next(r for r in RESOURCES if r.kind == kind)
    item = {"metadata": {"name": "x", "managedFields": [{"manager": "kubectl"}]}}
    assert as_snapshot_object(resource, item) == {
        "apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}


@pytest.mark.parametrize("name", ["snapshot.yaml", "snapshot.json"])
def test_a_saved_snapshot_replays_to_the_same_placements(name: str, tmp_path: Path) -> None:
    pending = make_pod("web", cpu="600m", node_selector=GROUP, scheduler_name="berthmaster")
    objects = cluster(make_pod("db", cpu="500m", node_name="big"), pending)
    path = tmp_path / name
    save_snapshot(objects, str(path))
    if name.endswith(".json"):
        assert json.loads(path.read_text())["kind"] == "List"
    replayed = simulate(*load_inputs(str(path), None), Engine(seed=0), explain=True)
    direct = simulate(*build_inputs([Source("objects", objects)]), Engine(seed=0), explain=True)
    assert replayed == direct


def test_save_needs_from_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text("")
    assert main(["simulate", "--cluster", str(snapshot), "--save", "x.yaml"]) == 2
    assert capsys.readouterr().err == (
        "berthmaster simulate: --save, --kubeconfig and --context go with --from-cluster; add "
        "it (or drop them to simulate the --cluster file)\n")


def test_kubectl_plugin_entry_point() -> None:
    """kubectl runs an executable named kubectl-<plugin> found on PATH (k8s.io/kubectl
    pkg/cmd/plugin/plugin.go ``ValidPluginFilenamePrefixes = []string{"kubectl"}``, looked up by
    pkg/cmd/cmd.go ``DefaultPluginHandler.Lookup``)."""
    (entry,) = [e for e in importlib.metadata.entry_points(group="console_scripts")
                if e.name == "kubectl-berthmaster"]
    assert entry.value == "berthmaster.cli:kubectl_plugin"


def test_kubectl_plugin_usage_names_kubectl(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--help"], prog="kubectl berthmaster")
    assert capsys.readouterr().out.startswith("usage: kubectl berthmaster explain ")


def test_the_pod_as_listed_with_the_cluster_wins() -> None:
    """The pod is read first, then the cluster: if it was bound in between, the listed copy
    (consistent with the rest) is what is explained."""
    read_first = make_pod("web", cpu="1500m", node_selector=GROUP, uid="web-uid",
                          scheduler_name="berthmaster")
    listed = make_pod("web", cpu="1500m", node_selector=GROUP, uid="web-uid", node_name="big",
                      scheduler_name="berthmaster")
    answer = explain(cluster(listed), read_first, Engine(seed=0))
    assert answer.notes[0].startswith("pod default/web is bound to node big")
    assert answer.placement["nodes"]["big"]["fits"] is True


def test_a_binary_policy_file_fails_before_connecting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "policy.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    assert main(["explain", "pod", "default/web", "--policy", str(binary),
                 "--kubeconfig", "/nonexistent"]) == 2
    assert capsys.readouterr().err == (
        f"berthmaster explain: {binary} is a binary file, not YAML or JSON; give the text "
        "file\n")


@pytest.mark.parametrize(("data", "source"), [
    ({"policy.json": POLICY, "policy.cfg": "{}"}, "ConfigMap ns/p key policy.json"),
    ({"policy.cfg": POLICY}, "ConfigMap ns/p key policy.cfg"),
    ({"other": POLICY}, None),
])
def test_the_policy_keys_of_a_configmap(data: dict[str, str], source: str | None) -> None:
    chosen = policy_from_configmap({"metadata": {"namespace": "ns", "name": "p"}, "data": data})
    assert (chosen.source if chosen else None) == source


def test_a_configuration_configmap_gives_the_pods_profile() -> None:
    """The chart's scheduler.config ConfigMap (key config.yaml): the profile of the pod's
    schedulerName, else the first."""
    config = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
              "profiles:\n- schedulerName: a\n- schedulerName: b\n"
              "  plugins: {score: {disabled: [{name: '*'}]}}\n")
    configmap = {"metadata": {"namespace": "ns", "name": "c"}, "data": {"config.yaml": config}}
    chosen = policy_from_configmap(configmap, "b")
    assert chosen is not None and chosen.policy.scheduler_name == "b"
    assert chosen.policy.priorities == ()
    assert chosen.source == "ConfigMap ns/c key config.yaml profile b"
    first = policy_from_configmap(configmap, "other")
    assert first is not None and first.policy.scheduler_name == "a"


def test_the_preemption_it_would_try() -> None:
    """Nothing fits: the answer names the node preemption would nominate and its victims, as
    simulate's entry does (upstream: pkg/scheduler/framework/preemption/preemption.go
    ``Evaluator.Preempt``); nothing is deleted."""
    low = make_pod("low", cpu="1500m", priority=0, node_name="big")
    low_small = make_pod("low-small", cpu="900m", priority=100, node_name="small")
    urgent = make_pod("urgent", cpu="1", priority=1000, node_selector=GROUP,
                      scheduler_name="berthmaster")
    placement = explain(cluster(low, low_small, urgent), urgent, Engine(seed=0)).placement
    assert placement["node"] is None
    assert placement["nominatedNode"] == "big" and placement["victims"] == ["default/low"]
    assert placement["nodes"]["big"]["predicates"]["NodeResourcesFit"] == "Insufficient cpu"
