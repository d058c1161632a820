"""The scheduler benchmark says plainly whether its bind-only stub was a ceiling."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "bench_scheduler.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scheduler", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scheduler"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def result(bench: ModuleType, scheduler: str, workload: str, rate: float) -> Any:
    return bench.Result(scheduler, workload, 100, 100, 100 / rate, 1.0, 2.0, 1.0, 100.0)


def test_the_stub_binds_with_berthmasters_concurrency(bench: ModuleType) -> None:
    assert bench.berthmaster_bind_concurrency() == 64  # berthmaster's default
    assert bench.berthmaster_bind_concurrency(["--bind-concurrency", "128"]) == 128


@pytest.mark.parametrize(("rates", "want"), [
    ({"stub": 150.0, "berthmaster": 145.0, "kube-scheduler": 97.0},
     ["basic: the stub is a ceiling: 150.0 pods/s, at least as fast as every scheduler of the "
      "run"]),
    ({"stub": 81.0, "berthmaster": 145.0, "kube-scheduler": 97.0},
     ["basic: the stub is NOT a ceiling: it bound 81.0 pods/s, slower than berthmaster 145.0, "
      "kube-scheduler 97.0; x R_ceil means nothing here"]),
    ({"berthmaster": 145.0}, []),  # no stub in the run: nothing to say
])
def test_ceiling_verdict(bench: ModuleType, rates: dict[str, float], want: list[str]) -> None:
    results = [result(bench, name, "basic", rate) for name, rate in rates.items()]
    assert bench.ceiling_verdicts(results) == want


def test_a_stub_paced_by_pod_creation_is_named(bench: ModuleType) -> None:
    stub = result(bench, "stub", "basic", 100.0)  # 100 pods in 1.0 s
    stub.extra["created_s"] = 0.92
    lines = bench.ceiling_verdicts([stub, result(bench, "berthmaster", "basic", 120.0)])
    assert lines[1] == ("  (creating the stub run's pods took 0.9 of its 1.0 s: the harness's "
                        "pod creation set its pace)")
    stub.extra["created_s"] = 0.5
    assert len(bench.ceiling_verdicts([stub, result(bench, "berthmaster", "basic", 120.0)])) == 1


def test_kwok_leases_renew_at_most_50_times_a_second(bench: ModuleType) -> None:
    """kwok renews a lease at a quarter of its duration: nodes * 4 / lease <= 50."""
    assert bench.node_lease_seconds(200) == 40  # the kubelet's default, small clusters
    for nodes in (500, 501, 2000, 5000, 12345):
        lease = bench.node_lease_seconds(nodes)
        assert lease >= 40 and nodes * 4 / lease <= 50
        assert nodes * 4 / (lease - 1) > 50 or lease == 40  # and no longer than that


def test_the_gang_workloads_label_whole_groups_and_enable_coscheduling(
        bench: ModuleType, tmp_path: Path) -> None:
    """gang-8 and gang-64: consecutive pods share a PodGroup (scheduler-plugins' label
    scheduling.x-k8s.io/pod-group); berthmaster's configuration enables Coscheduling."""
    from berthmaster.scheduler.config import load_config

    groups = [bench.pod_body(f"p-{i}", "s", "gang-8", i)["metadata"]["labels"][
        bench.POD_GROUP_LABEL] for i in range(17)]
    assert groups == ["g-0"] * 8 + ["g-1"] * 8 + ["g-2"]
    config = load_config(bench.gang_config(tmp_path, "bench-gang").read_text(), "gang")
    (profile,) = config.profiles
    assert profile.scheduler_name == "bench-gang"
    assert any(e.name == "Coscheduling" and "permit" in e.points for e in profile.extensions)
    assert profile.watches[0].kind == "PodGroup"


def test_the_plugin_overhead_is_the_difference_of_the_seconds_per_pod(
        bench: ModuleType) -> None:
    """1/pods_s(plugin) - 1/pods_s(default), in ms: 100 -> 80 pods/s costs 2.5 ms a pod."""
    assert bench.overhead_ms_per_pod(100.0, 80.0) == pytest.approx(2.5)
    assert bench.overhead_ms_per_pod(100.0, 125.0) == pytest.approx(-2.0)  # noise says so
    assert bench.overhead_ms_per_pod(0.0, 80.0) is None
    assert bench.overhead_ms_per_pod(100.0, 0.0) is None


def test_the_plugin_overhead_line_compares_the_two_berthmaster_runs(bench: ModuleType) -> None:
    runs = [result(bench, "berthmaster", "basic", 100.0),
            result(bench, "berthmaster-plugin", "basic", 80.0),
            result(bench, "kube-scheduler", "basic", 90.0),
            result(bench, "berthmaster", "spread", 50.0)]  # no plugin run: no line
    assert bench.plugin_overhead_lines(runs) == [
        "basic: plugin API: berthmaster 100.0 pods/s, with BenchTrivial 80.0 pods/s: "
        "+2.500 ms/pod (cpu +0.00 ms/pod)"]


@pytest.mark.parametrize(("given", "want"), [
    (["stub", "berthmaster", "kube-scheduler"],
     ["stub", "berthmaster", "berthmaster-plugin", "kube-scheduler"]),
    (["kube-scheduler"], ["kube-scheduler", "berthmaster", "berthmaster-plugin"]),
    (["berthmaster-plugin", "berthmaster"], ["berthmaster", "berthmaster-plugin"]),
])
def test_plugin_overhead_runs_the_plugin_right_after_berthmaster(
        bench: ModuleType, given: list[str], want: list[str]) -> None:
    assert bench.with_plugin_run(given, True) == want
    assert bench.with_plugin_run(given, False) == given


def test_the_plugin_run_loads_the_trivial_plugin_through_its_entry_point(
        bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin run's configuration enables BenchTrivial, found as an installed package's
    plugin is (scheduler/plugins/out_of_tree.py: the ``berthmaster.plugins`` entry point group)
    once the scheduler's PYTHONPATH holds bench/trivial_plugin; it passes every node (no Skip)
    and scores every node 0, so the placement stays the default profile's."""
    from berthmaster.scheduler import framework
    from berthmaster.scheduler.plugins import out_of_tree
    from berthmaster.scheduler.testing import profile_from_yaml, run_pod, snapshot_from_yaml

    env = bench.plugin_environment({"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(":") == [str(bench.TRIVIAL_PLUGIN_PATH), "/elsewhere"]
    assert bench.plugin_environment({})["PYTHONPATH"] == str(bench.TRIVIAL_PLUGIN_PATH)
    monkeypatch.syspath_prepend(str(bench.TRIVIAL_PLUGIN_PATH))
    assert isinstance(out_of_tree.find("BenchTrivial"), framework.PluginKind)
    profile = profile_from_yaml(bench.plugin_config_text("bench-plugin"))
    assert profile.scheduler_name == "bench-plugin"
    nodes = "\n---\n".join(
        f"kind: Node\nmetadata: {{name: n{i}}}\n"
        f"status: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}" for i in range(3))
    pod = "kind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: [{name: c}]}"
    outcome = run_pod(pod, snapshot_from_yaml(nodes), profile)
    assert outcome.node is not None
    assert {n: f["BenchTrivial"] for n, f in outcome.filters.items()} == {
        "n0": "", "n1": "", "n2": ""}
    assert {n: s["BenchTrivial"] for n, s in outcome.scores.items()} == {
        "n0": 0, "n1": 0, "n2": 0}
