"""berthmaster against kube-scheduler 1.35 itself, on random scenarios, on one API server.

Both schedulers run at once on the test session's control plane: kube-scheduler (the binary
the local control plane builds) with its default profile, logging at ``-v=10``, and
berthmaster (in-process) with no configuration at all, as users get it. Each incoming pod of
each scenario (``tests.support.scenarios``) goes to each scheduler in turn on the same cluster
state (``tests.support.differential``), and:

- both must agree on whether it fits (bound, preempting, or unschedulable);
- when it does not fit, the FailedScheduling text (the ``PodScheduled`` condition's message)
  must be identical, word for word: kube-scheduler 1.35's FitError (pkg/scheduler/framework/
  types.go, FitError.Error), whose counts come from the first failing filter per node in the
  default profile's order (pkg/scheduler/apis/config/v1/default_plugins.go,
  getDefaultPlugins) and whose PostFilter part joins DynamicResources' and DefaultPreemption's
  reasons (pkg/scheduler/framework/runtime/framework.go, RunPostFilterPlugins;
  pkg/scheduler/framework/preemption/preemption.go, Evaluator.Preempt);
- when it fits, kube-scheduler's final score of every feasible node (its log's "Calculated
  node's final score for pod", pkg/scheduler/schedule_one.go, prioritizeNodes) must be
  berthmaster's (``Engine.schedule(explain=True)``), and berthmaster's node must be one of
  kube-scheduler's top-scored; where kube-scheduler scored only a sample of the feasible nodes
  (over 100 nodes) the scores are not compared and the pod is counted apart;
- a node either one chose must be feasible for the other.

A share of the small scenarios carries storage (``tests.support.volume_scenarios``:
StorageClasses Immediate and WaitForFirstConsumer, no-provisioner and CSI provisioners, a
CSIDriver that may publish capacity, local volumes, bound, unbound and missing claims, CSINodes
with volume limits, CSIStorageCapacities), so VolumeBinding, VolumeZone and NodeVolumeLimits
are compared too: a pod with claims that fits is bound by each scheduler for
real (PreBind's writes and wait), the harness playing the provisioner the local control plane
lacks and putting the storage back between copies (``tests.support.differential_storage``).

Then a second part, the same comparison under generated configurations: batches of scenarios,
each batch under one KubeSchedulerConfiguration drawn from the seed
(``tests.support.scheduler_configs.random_config``: score weights, disabled score plugins,
NodeResourcesFit's scoring strategy and resources, NodeResourcesBalancedAllocation's resources,
PodTopologySpread's default constraints, InterPodAffinity's hardPodAffinityWeight, a disabled
filter, percentageOfNodesToScore). The same file goes to both:
kube-scheduler is restarted with ``--config`` holding that profile under its schedulerName
(its log must say it synced its informers: it exits on a file it does not accept), and
berthmaster loads it with ``load_config`` under its own schedulerName and runs it as the
service and as the engine that explains its scores. A disagreement then quotes the file.

The scenarios are seeded: ``BERTHMASTER_DIFF_SEED`` (default below),
``BERTHMASTER_DIFF_SCENARIOS`` for the default part, ``BERTHMASTER_DIFF_CONFIG_BATCHES``
configurations of ``BERTHMASTER_DIFF_CONFIG_SCENARIOS`` scenarios each for the second (the
default set: over 600 pods in each part, about eight minutes on two cores). The set is run in
two tests that share nothing but the seed: the quick one (in ``make test``) takes the first
``QUICK_SCENARIOS`` scenarios (60) and the first ``QUICK_BATCHES`` configuration (1), the long one
(marked ``long``: ``make test-long``, which CI runs after ``make test``) all the others, so
together they compare the whole set. Raise the counts for a soak, e.g.
``BERTHMASTER_DIFF_SCENARIOS=2000 BERTHMASTER_DIFF_CONFIG_BATCHES=100 make test-long``.
A failure prints the
first disagreement of each kind with its scenario (and its configuration), so a seed and an
index reproduce it: the second part's batch ``b`` is configuration ``b`` of the seed and
scenarios ``CONFIG_INDEX_BASE + b * CONFIG_INDEX_STRIDE`` on.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import KubeClient
from berthmaster.scheduler.config import load_config
from berthmaster.scheduler.engine import Engine
from berthmaster.tooling.devcluster import build
from berthmaster.tooling.devcluster.schedulers import (
    Proc,
    kube_scheduler_config,
    start_kube_scheduler,
)
from tests.support.differential import Disagreement, Harness
from tests.support.scenarios import Scenario, generate
from tests.support.scheduler_configs import random_config, renamed
from tests.support.waiting import wait_for

SEED = int(os.environ.get("BERTHMASTER_DIFF_SEED", "20261123"))
SCENARIOS = int(os.environ.get("BERTHMASTER_DIFF_SCENARIOS", "300"))
CONFIG_BATCHES = int(os.environ.get("BERTHMASTER_DIFF_CONFIG_BATCHES", "12"))
CONFIG_SCENARIOS = int(os.environ.get("BERTHMASTER_DIFF_CONFIG_SCENARIOS", "25"))
# the quick test's share of the set (the first ones of each part; BERTHMASTER_DIFF_QUICK_SCENARIOS
# and BERTHMASTER_DIFF_QUICK_BATCHES change it); the long test runs the rest
QUICK_SCENARIOS = min(SCENARIOS, int(os.environ.get("BERTHMASTER_DIFF_QUICK_SCENARIOS", "60")))
QUICK_BATCHES = min(CONFIG_BATCHES, int(os.environ.get("BERTHMASTER_DIFF_QUICK_BATCHES", "1")))
# the second part's scenario indices, apart from the first part's
CONFIG_INDEX_BASE, CONFIG_INDEX_STRIDE = 1_000_000, 10_000
# floors, as shares of the pods compared, so that a run comparing (almost) nothing fails
FLOORS = {"bound/bound": 0.3, "unschedulable/unschedulable": 0.05,
          "nominated/nominated": 0.01, "scores compared (all equal)": 0.2}
# the quick share's 60 scenarios hold one or two preemptions, and whether such a pod is
# nominated or finds room as the scenario's other copies come and go is timing (both runs on
# one seed: 0 and 1 of 128 pods): no preemption floor there; the whole set's (over 600 pods)
# keeps it, and tests/integration/scheduler/test_sched_preemption.py covers preemption
QUICK_FLOORS = {k: v for k, v in FLOORS.items() if k != "nominated/nominated"}
# under generated configurations (preemptions are few in a small batch: no floor)
CONFIG_FLOORS = {"bound/bound": 0.3, "unschedulable/unschedulable": 0.05,
                 "scores compared (all equal)": 0.2}
# -v=10: prioritizeNodes logs every plugin's and the final score of each node. Opportunistic
# batching (on by default in 1.35) lets a pod of the same signature as the previous cycle's
# take that cycle's next best node unscored (pkg/scheduler/framework/runtime/batch.go,
# GetNodeHint): this test reads every pod's scores, so it is off.
KUBE_SCHEDULER_FLAGS = ("-v=10", "--feature-gates=OpportunisticBatching=false")
# a preemptor is retried once its victims are gone; 1 s is the shortest backoff allowed
BACKOFF = {"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 1}


async def _run(harness: Harness, proc: Proc, scenarios: list[Scenario]) -> list[Disagreement]:
    found: list[Disagreement] = []
    for scenario in scenarios:
        assert proc.alive(), f"kube-scheduler exited:\n{proc.log_tail()}"
        found.extend(await harness.run(scenario))
    return found


async def _started(proc: Proc) -> None:
    """kube-scheduler built its profile from the file (it exits on one it does not accept)
    and synced its informers (cmd/kube-scheduler/app/server.go, Run: "Handlers synced")."""
    def synced() -> bool:
        assert proc.alive(), f"kube-scheduler refused the configuration:\n{proc.log_tail()}"
        return "Handlers synced" in proc.log.read_text(errors="replace")

    await wait_for(synced, timeout=60, what="kube-scheduler's informers synced", interval=0.1)


def _report(part: str, harness: Harness, found: list[Disagreement], floors: dict[str, float],
            scenarios: int) -> list[str]:
    """The part's summary is printed; its failures returned (disagreements, floors)."""
    kinds = Counter(d.kind for d in found)
    print(f"{part}: {harness.compared} pods compared, {len(found)} disagreements "
          f"(seed {SEED}) {dict(kinds)}; outcomes {dict(harness.outcomes)}; "
          f"seconds {({k: round(v, 1) for k, v in harness.seconds.items()})}")
    failures = []
    if found:
        first = {d.kind: d for d in reversed(found)}
        failures.append(f"{part}: {len(found)} disagreement(s) of {harness.compared} pods "
                        f"(seed {SEED}), by kind {dict(kinds)}; the first of each:\n\n"
                        + "\n\n".join(str(d) for d in first.values()))
    if harness.compared < scenarios:  # every scenario brings at least one incoming pod
        failures.append(f"{part}: only {harness.compared} pods compared in {scenarios} "
                        "scenarios")
    for outcome, share in floors.items():
        if harness.outcomes[outcome] < max(1, int(share * harness.compared)):
            failures.append(f"{part}: too few pods {outcome!r}: {harness.outcomes[outcome]} "
                            f"of {harness.compared}")
    return failures


def _timeout(scenarios: int, batches: int) -> int:
    """pytest-timeout's 300 s is for ordinary tests; a differential run's time grows with its
    scenarios (about a second each on two cores, and a kube-scheduler restart per
    configuration)."""
    return 300 + 3 * (scenarios + batches * CONFIG_SCENARIOS) + 20 * batches


# alone, after the parallel workers (hack/test.sh): under their load, kube-scheduler and
# berthmaster reach too few preemption decisions within a scenario for the coverage floors
@pytest.mark.serial
@pytest.mark.timeout(_timeout(QUICK_SCENARIOS, QUICK_BATCHES))
async def test_berthmaster_agrees_with_kube_scheduler(cluster: Any, kube: KubeClient,
                                                      run_scheduler: Any,
                                                      tmp_path: Path) -> None:
    """The quick share of the seed's set: its first scenarios and configurations."""
    await _compare(cluster, kube, run_scheduler, tmp_path, range(QUICK_SCENARIOS),
                   range(QUICK_BATCHES), QUICK_FLOORS)


@pytest.mark.long
@pytest.mark.timeout(_timeout(SCENARIOS - QUICK_SCENARIOS, CONFIG_BATCHES - QUICK_BATCHES))
async def test_berthmaster_agrees_with_kube_scheduler_on_the_whole_seed_set(
        cluster: Any, kube: KubeClient, run_scheduler: Any, tmp_path: Path) -> None:
    """The rest of the seed's set: every scenario and configuration the quick test leaves."""
    if SCENARIOS <= QUICK_SCENARIOS and CONFIG_BATCHES <= QUICK_BATCHES:
        pytest.skip("the quick test already ran the whole (smaller) set")
    await _compare(cluster, kube, run_scheduler, tmp_path, range(QUICK_SCENARIOS, SCENARIOS),
                   range(QUICK_BATCHES, CONFIG_BATCHES), FLOORS)


async def _compare(cluster: Any, kube: KubeClient, run_scheduler: Any, tmp_path: Path,
                   indices: range, batch_numbers: range, floors: dict[str, float]) -> None:
    """Both parts (see the module doc) over the default part's scenario ``indices`` (held to
    ``floors``) and the configurations ``batch_numbers``; fails on any disagreement or floor
    missed."""
    name = f"kube-diff-{uuid.uuid4().hex[:6]}"
    binary = build.binary_path("kube-scheduler")
    kubeconfig = str(cluster.kubeconfig)
    config = kube_scheduler_config(kubeconfig, name, qps=500, burst=1000, extra=BACKOFF)
    proc = start_kube_scheduler(binary, config, tmp_path, "kube-scheduler",
                                flags=KUBE_SCHEDULER_FLAGS)
    berthmaster = await run_scheduler.start()  # no policy: what users get
    harness = Harness(kube, name, berthmaster.name, Engine(), proc.log)
    scenarios = generate(SEED, len(indices), indices.start)
    batches = {b: generate(SEED, CONFIG_SCENARIOS, CONFIG_INDEX_BASE + b * CONFIG_INDEX_STRIDE)
               for b in batch_numbers}
    failures: list[str] = []
    try:
        await harness.prepare(max((len(s.nodes) for s in scenarios), default=0))
        try:
            found = await _run(harness, proc, scenarios)
        finally:
            proc.stop()
            await berthmaster.stop()
        if scenarios:
            failures += _report(f"default profile, scenarios {indices.start}-"
                                f"{indices.stop - 1}", harness, found, floors, len(indices))
        default_compared = harness.compared
        harness.compared, harness.outcomes, harness.seconds = 0, Counter(), Counter()
        found = []
        for b, batch in batches.items():
            ks_name, bm_name = f"{name}-c{b}", f"{run_scheduler.name}-c{b}"
            generated = random_config(SEED, b, ks_name)
            text = yaml.safe_dump(generated, sort_keys=False)
            # the generated file with kube-scheduler's connection and the backoff: the file
            # both read, under their own schedulerNames
            top = {k: v for k, v in generated.items()
                   if k not in ("apiVersion", "kind", "profiles")}
            full = kube_scheduler_config(kubeconfig, ks_name, qps=500, burst=1000,
                                         profile=generated["profiles"][0],
                                         extra={**BACKOFF, **top})
            proc = start_kube_scheduler(binary, full, tmp_path, f"kube-scheduler-c{b}",
                                        flags=KUBE_SCHEDULER_FLAGS)
            loaded = load_config(yaml.safe_dump(renamed(full, bm_name)), f"configuration {b}")
            berthmaster = await run_scheduler.start(loaded)
            try:
                await _started(proc)
                harness.use(ks_name, bm_name, Engine(
                    loaded.profiles[0],
                    percentage_of_nodes_to_score=loaded.percentage_of_nodes_to_score),
                    proc.log, f"# configuration {b} of seed {SEED}\n{text}")
                await harness.grow(max(len(s.nodes) for s in batch))
                found.extend(await _run(harness, proc, batch))
            finally:
                proc.stop()
                await berthmaster.stop()
        failures += _report(f"generated configurations {batch_numbers.start}-"
                            f"{batch_numbers.stop - 1}, {CONFIG_SCENARIOS} scenarios each",
                            harness, found, CONFIG_FLOORS, len(batches) * CONFIG_SCENARIOS)
        # the second part compares as many pods per scenario as the first, give or take
        wanted = int(0.5 * default_compared * len(batches) * CONFIG_SCENARIOS
                     / max(1, len(indices)))
        if harness.compared < max(1, wanted):
            failures.append(f"only {harness.compared} pods compared under generated "
                            f"configurations (at least {wanted} wanted)")
    finally:
        await harness.cleanup()
    assert not failures, "\n\n".join(failures)
