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
