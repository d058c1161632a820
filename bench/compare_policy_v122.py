"""Compare berthmaster with kube-scheduler v1.22, the last release that read a Policy file.

Builds kube-scheduler v1.22.17 from the pinned wrapper module ``hack/kube-scheduler-v1.22`` (cached
like the control plane's binaries; ``make test`` never builds it), starts a local control plane (or
uses ``--kubeconfig``), and runs both schedulers with the same Policy file (the default Policy,
scheduler/data/default-policy.json, unless ``--policy``): kube-scheduler v1.22 with
``--policy-config-file`` (its Policy profile is named ``default-scheduler``) and
``--feature-gates=CSIStorageCapacity=false`` (v1.22 would watch ``storage.k8s.io/v1beta1``
CSIStorageCapacities, which today's API server no longer serves), berthmaster as a process.

The scenarios are the differential test's (``tests/support/scenarios.py``), each incoming pod
placed by each scheduler in turn on the same cluster state. Per pod it reports: whether both
agree on fitting, the chosen nodes, the FailedScheduling texts, and the scores: v1.22's final
node scores (logged at ``-v=10``: "Calculated node's final score for pod", each plugin 0..100
times its weight) beside berthmaster's (``simulate --explain``'s totals, each priority 0..10
times its weight, so x10 to compare). Figures are printed, never asserted.

    .venv/bin/python bench/compare_policy_v122.py --scenarios 40 --policy FILE

What it found (2026-11, seed 20261123): v1.22.17 cannot start with that default policy:
its Policy path defaults each plugin's arguments through the v1beta2 config scheme, where
``NodeResourcesLeastAllocatedArgs`` (LeastRequestedPriority) and ``ServiceAffinityArgs``
(the ``Region``/``Zone`` entries) no longer exist ("no kind ... is registered for version
kubescheduler.config.k8s.io/v1beta2", v1.22 pkg/scheduler/factory.go,
defaultPluginConfigArgs). With those three entries removed from the file, on 12 scenarios / 29
pods: both agree on fitting for 28; the one difference is v1.22's NodeResourcesFit rejecting a
pod that requests no memory on nodes whose running pods overcommit memory (v1.22 fitsRequest
has no ``request > 0`` guard; 1.35 and berthmaster have it). Bound pods went to the same node
8 and 9 of 9 times in two runs (a tie broken differently); the top-scored nodes overlap every
time, totals equal up to the 0..10 vs 0..100 rounding. Failure texts differ by design: v1.22's
Policy order runs GeneralPredicates (resources first) before PodToleratesNodeTaints (v1.22
legacy_registry.go, predicateOrdering), and its FitError has no PostFilter sentence;
berthmaster follows 1.35. The scenarios have since gained pod-level resources and running pods
resized in place, which v1.22 does not know of (it counts container requests only): pods
beside them may differ by design too (the run above predates them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the scenarios and harness live with the tests

from berthmaster.foundation.kube import KubeClient  # noqa: E402
from berthmaster.scheduler.engine import Engine  # noqa: E402
from berthmaster.scheduler.policy import load_policy  # noqa: E402
from berthmaster.tooling.devcluster import build  # noqa: E402
from berthmaster.tooling.devcluster.schedulers import Proc  # noqa: E402
from berthmaster.tooling.python import BERTHMASTER_CLI  # noqa: E402
from tests.support.differential import Harness, Outcome  # noqa: E402
from tests.support.scenarios import copy_for, describe_pod, generate  # noqa: E402

VERSION = "v1.22.17"
FAMILY = build.Family(
    "kube-scheduler-v1.22",
    (("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),),
    ldflags="-s -w " + " ".join(
        f"-X k8s.io/component-base/version.{k}={v}"
        for k, v in (("gitVersion", VERSION), ("gitMajor", "1"), ("gitMinor", "22"),
                     ("gitTreeState", "clean"))),
)
V122_NAME = "default-scheduler"  # v1.22 createFromPolicy names its one profile so
FINAL_SCORE = re.compile(r'"Calculated node\'s final score for pod" pod="([^"]+)" '
                         r'node="([^"]+)" score=(\d+)')


def start_v122(binary: Path, kubeconfig: str, policy: Path, workdir: Path) -> Proc:
    log = workdir / "kube-scheduler-v1.22.log"
    with log.open("wb") as handle:
        popen = subprocess.Popen(
            [str(binary), f"--kubeconfig={kubeconfig}", f"--policy-config-file={policy}",
             "--leader-elect=false", "--secure-port=0", "--port=0",
             "--feature-gates=CSIStorageCapacity=false", "-v=10"],
            stdout=handle, stderr=subprocess.STDOUT)
    return Proc(popen, log)


def start_berthmaster(kubeconfig: str, policy: Path, name: str, workdir: Path) -> Proc:
    log = workdir / "berthmaster.log"
    with log.open("wb") as handle:
        popen = subprocess.Popen(
            [*BERTHMASTER_CLI, "scheduler", "--kubeconfig", kubeconfig,
             "--scheduler-name", name, "--no-leader-elect", "--policy", str(policy),
             "--metrics-bind-address", ""], stdout=handle, stderr=subprocess.STDOUT)
    return Proc(popen, log)


def v122_scores(log: Path, pod: str) -> dict[str, int]:
    scores: dict[str, int] = {}
    for match in FINAL_SCORE.finditer(log.read_text(errors="replace")):
        if match.group(1) == pod:
            scores[match.group(2)] = int(match.group(3))
    return scores


def best(scores: dict[str, int]) -> set[str]:
    top = max(scores.values(), default=None)
    return {n for n, s in scores.items() if s == top}


async def compare(args: argparse.Namespace, workdir: Path) -> None:
    policy_text = Path(args.policy).read_text()
    engine = Engine(load_policy(policy_text, args.policy))
    kube = await KubeClient.from_kubeconfig(args.kubeconfig)
    bm_name = f"berthmaster-v122-{uuid.uuid4().hex[:4]}"
    v122 = start_v122(args.binary, args.kubeconfig, Path(args.policy), workdir)
    bm = start_berthmaster(args.kubeconfig, Path(args.policy), bm_name, workdir)
    harness = Harness(kube, V122_NAME, bm_name, engine)
    tally: Counter[str] = Counter()
    notes: list[str] = []
    try:
        await harness.prepare()
        for scenario in generate(args.seed, args.scenarios):
            if not v122.alive():
                raise SystemExit(f"kube-scheduler v1.22 exited:\n{v122.log_tail()}")
            await harness.setup(scenario)
            for pod in scenario.incoming:
                snapshot = await harness.snapshot()
                explained = engine.schedule(copy_for(pod, bm_name, "x"), snapshot,
                                            explain=True)
                old: Outcome = await harness.place(pod, V122_NAME, "k", scenario.existing)
                new: Outcome = await harness.place(pod, bm_name, "b", scenario.existing)
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}-k"
                old_scores = v122_scores(v122.log, key)
                new_scores = {n: s * 10 for n, s in explained.scores.items()}
                tally["pods"] += 1
                tally[f"fit {old.kind}/{new.kind}"] += 1
                line = [f"scenario {scenario.index} {describe_pod(pod)}",
                        f"  v1.22: {old}", f"  berthmaster: {new}"]
                if old.kind == new.kind == "bound":
                    tally["same node" if old.node == new.node else "other node"] += 1
                    if old_scores and new_scores:
                        same_best = bool(best(old_scores) & best(new_scores))
                        tally["top-scored nodes overlap" if same_best
                              else "top-scored nodes differ"] += 1
                        tally["scores equal (x10)" if old_scores == new_scores
                              else "scores differ (x10)"] += 1
                        if old_scores != new_scores:
                            line.append(f"  scores v1.22 {old_scores} berthmaster x10 "
                                        f"{new_scores}")
                elif old.kind == new.kind:
                    tally["same text" if old.message == new.message else "other text"] += 1
                if old.kind != new.kind or old.node != new.node or \
                        old.message != new.message or old_scores != new_scores:
                    notes.append("\n".join(line))
    finally:
        v122.stop()
        bm.stop()
        await harness.cleanup()
        await kube.close()
    for note in notes[:args.show]:
        print(note, "\n")
    print(f"seed {args.seed}, {args.scenarios} scenarios:")
    for key, value in sorted(tally.items()):
        print(f"  {key:<28} {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="use this cluster (default: start a local one)")
    parser.add_argument("--scenarios", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--policy", default=str(REPO / "scheduler" / "data"
                                                / "default-policy.json"))
    parser.add_argument("--show", type=int, default=15, help="pods with differences to print")
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args(argv)
    args.binary = build.build_family(FAMILY, print) / "kube-scheduler"
    if args.build_only:
        print(args.binary)
        return 0
    plane = None
    if not args.kubeconfig:
        from berthmaster.tooling.devcluster.cluster import ControlPlane
        plane = ControlPlane(f"v122-{os.getpid()}")
        args.kubeconfig = str(plane.up().kubeconfig)
    try:
        with tempfile.TemporaryDirectory(prefix="v122-") as tmp:
            asyncio.run(compare(args, Path(tmp)))
    finally:
        if plane is not None:
            plane.down(quiet=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
