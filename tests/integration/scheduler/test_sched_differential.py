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

The scenarios are seeded: ``BERTHMASTER_DIFF_SEED`` (default below) and
``BERTHMASTER_DIFF_SCENARIOS`` (the quick set by default, about two minutes on two cores;
raise it for a soak, e.g. ``BERTHMASTER_DIFF_SCENARIOS=2000``). A failure prints the first
disagreement of each kind with its scenario, so a seed and an index reproduce it.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from berthmaster.devcluster import build
from berthmaster.devcluster.schedulers import kube_scheduler_config, start_kube_scheduler
from berthmaster.kube import KubeClient
from berthmaster.scheduler.engine import Engine
from tests.support.differential import Disagreement, Harness
from tests.support.scenarios import generate

SEED = int(os.environ.get("BERTHMASTER_DIFF_SEED", "20261123"))
SCENARIOS = int(os.environ.get("BERTHMASTER_DIFF_SCENARIOS", "120"))
# floors, as shares of the pods compared, so that a run comparing (almost) nothing fails
FLOORS = {"bound/bound": 0.3, "unschedulable/unschedulable": 0.05,
          "nominated/nominated": 0.01, "scores compared (all equal)": 0.2}


async def test_berthmaster_agrees_with_kube_scheduler(cluster: Any, kube: KubeClient,
                                                      run_scheduler: Any,
                                                      tmp_path: Path) -> None:
    name = f"kube-diff-{uuid.uuid4().hex[:6]}"
    # a preemptor is retried once its victims are gone; 1 s is the shortest backoff allowed
    config = kube_scheduler_config(str(cluster.kubeconfig), name, qps=500, burst=1000,
                                   extra={"podInitialBackoffSeconds": 1,
                                          "podMaxBackoffSeconds": 1})
    # -v=10: prioritizeNodes logs every plugin's and the final score of each node. Opportunistic
    # batching (on by default in 1.35) lets a pod of the same signature as the previous
    # cycle's take that cycle's next best node unscored (pkg/scheduler/framework/runtime/
    # batch.go, GetNodeHint): this test reads every pod's scores, so it is off.
    proc = start_kube_scheduler(build.binary_path("kube-scheduler"), config, tmp_path,
                                "kube-scheduler",
                                flags=("-v=10", "--feature-gates=OpportunisticBatching=false"))
    berthmaster = await run_scheduler.start()  # no policy: what users get
    harness = Harness(kube, name, berthmaster.name, Engine(), proc.log)
    scenarios = generate(SEED, SCENARIOS)
    found: list[Disagreement] = []
    try:
        await harness.prepare(max(len(s.nodes) for s in scenarios))
        for scenario in scenarios:
            assert proc.alive(), f"kube-scheduler exited:\n{proc.log_tail()}"
            found.extend(await harness.run(scenario))
    finally:
        proc.stop()
        await harness.cleanup()
    kinds = Counter(d.kind for d in found)
    print(f"{SCENARIOS} scenarios, {harness.compared} pods compared, "
          f"{len(found)} disagreements (seed {SEED}) {dict(kinds)}; "
          f"outcomes {dict(harness.outcomes)}; "
          f"seconds {({k: round(v, 1) for k, v in harness.seconds.items()})}")
    first = {d.kind: d for d in reversed(found)}
    assert not found, f"{len(found)} disagreement(s) of {harness.compared} pods " \
        f"(seed {SEED}), by kind {dict(kinds)}; the first of each:\n\n" + \
        "\n\n".join(str(d) for d in first.values())
    for outcome, share in FLOORS.items():
        assert harness.outcomes[outcome] >= max(1, int(share * harness.compared)), \
            f"too few pods {outcome!r}: {harness.outcomes[outcome]} of {harness.compared}"
