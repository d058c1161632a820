"""berthmaster against kube-scheduler 1.35 itself, on random scenarios, on one API server.

Both schedulers run at once on the test session's control plane: kube-scheduler (the binary
the local control plane builds) with its default profile, berthmaster (in-process) with the
default Policy plus PodTopologySpread (``devcluster.schedulers.comparison_policy``, as
the benchmark runs it). Each incoming pod of each scenario (``tests.support.scenarios``) goes
to each scheduler in turn on the same cluster state (``tests.support.differential``), and:

- both must agree on whether it fits (bound, preempting, or unschedulable);
- a node either one chose must be feasible for the other;
- when it does not fit, the FailedScheduling text (the ``PodScheduled`` condition's message)
  must be identical, word for word: kube-scheduler 1.35's FitError (pkg/scheduler/framework/
  types.go, FitError.Error), whose counts come from the first failing filter per node in the
  default profile's order (pkg/scheduler/apis/config/v1/default_plugins.go,
  getDefaultPlugins) and whose PostFilter part joins DynamicResources' and DefaultPreemption's
  reasons (pkg/scheduler/framework/runtime/framework.go, RunPostFilterPlugins;
  pkg/scheduler/framework/preemption/preemption.go, Evaluator.Preempt).

The scenarios are seeded: ``BERTHMASTER_DIFF_SEED`` (default below) and
``BERTHMASTER_DIFF_SCENARIOS`` (300 by default, a few minutes; raise it for a soak, e.g.
``BERTHMASTER_DIFF_SCENARIOS=3000``). A failure prints the first disagreements with their
scenario, so a seed and an index reproduce it.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from berthmaster.devcluster import build
from berthmaster.devcluster.schedulers import (
    comparison_policy,
    kube_scheduler_config,
    start_kube_scheduler,
)
from berthmaster.kube import KubeClient
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.policy import load_policy
from tests.support.differential import Disagreement, Harness
from tests.support.scenarios import generate

SEED = int(os.environ.get("BERTHMASTER_DIFF_SEED", "20261123"))
SCENARIOS = int(os.environ.get("BERTHMASTER_DIFF_SCENARIOS", "300"))


async def test_berthmaster_agrees_with_kube_scheduler(cluster: Any, kube: KubeClient,
                                                      run_scheduler: Any,
                                                      tmp_path: Path) -> None:
    name = f"kube-diff-{uuid.uuid4().hex[:6]}"
    # a preemptor is retried once its victims are gone; 1 s is the shortest backoff allowed
    config = kube_scheduler_config(str(cluster.kubeconfig), name, qps=500, burst=1000,
                                   extra={"podInitialBackoffSeconds": 1,
                                          "podMaxBackoffSeconds": 1})
    proc = start_kube_scheduler(build.binary_path("kube-scheduler"), config, tmp_path,
                                "kube-scheduler")
    policy = load_policy(json.dumps(comparison_policy()), "comparison policy")
    berthmaster = await run_scheduler.start(policy)
    harness = Harness(kube, name, berthmaster.name, Engine(policy))
    found: list[Disagreement] = []
    try:
        await harness.prepare()
        for scenario in generate(SEED, SCENARIOS):
            assert proc.alive(), f"kube-scheduler exited:\n{proc.log_tail()}"
            found.extend(await harness.run(scenario))
    finally:
        proc.stop()
        await harness.cleanup()
    print(f"{SCENARIOS} scenarios, {harness.compared} pods compared, "
          f"{len(found)} disagreements (seed {SEED}); outcomes {dict(harness.outcomes)}; "
          f"seconds {({k: round(v, 1) for k, v in harness.seconds.items()})}")
    assert not found, f"{len(found)} disagreement(s) of {harness.compared} pods " \
        f"(seed {SEED}); the first:\n\n" + "\n\n".join(str(d) for d in found[:8])
