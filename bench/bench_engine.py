"""Time one placement decision of the engine on a large synthetic cluster.

Four cases, as issue 3 asks, each on ``--nodes`` nodes (default 5000) with as many running
pods: a plain pod; node affinity plus taints; required pod anti-affinity (some running pods
carry required anti-affinity too); preferred pod affinity. Prints the median and p99 of
``Engine.schedule`` (time.perf_counter, wall clock) over ``--runs`` decisions per case, and the
median process CPU time (less sensitive to other load on a shared machine), with the default
policy and upstream's adaptive percentageOfNodesToScore (``--percentage`` to change it).

    .venv/bin/python bench/bench_engine.py              # 5000 nodes
    .venv/bin/python bench/bench_engine.py --nodes 500  # quick
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.snapshot import Snapshot

ZONES = ("zone-a", "zone-b", "zone-c")
APPS = 50


def build(nodes: int) -> Snapshot:
    node_objs = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        spec: dict[str, Any] = {}
        if i % 5 == 0:
            spec["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
        node_objs.append({
            "metadata": {"name": name, "uid": f"n{i}", "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3],
                "node-role.kubernetes.io/worker": "", "disktype": "ssd" if i % 2 else "hdd"}},
            "spec": spec,
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}})
    pod_objs = []
    for i in range(nodes):
        app = f"app-{i % APPS}"
        spec = {"nodeName": f"node-{i:05d}", "containers": [
            {"name": "c", "image": "img", "resources": {"requests": {"cpu": "500m",
                                                                      "memory": "1Gi"}}}]}
        if i % 10 == 0:
            spec["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": "kubernetes.io/hostname"}]}}
        pod_objs.append({"metadata": {"name": f"run-{i}", "namespace": "default",
                                      "uid": f"p{i}", "labels": {"app": app}},
                         "spec": spec, "status": {"phase": "Running"}})
    return Snapshot.build(nodes=node_objs, pods=pod_objs)


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"new-{name}",
                         "labels": {"app": "new"}},
            "spec": {"containers": [{"name": "c", "image": "img", "resources": {
                "requests": {"cpu": "250m", "memory": "512Mi"}}}], **spec}}


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "plain pod": lambda: pod("plain"),
    "node affinity + taints": lambda: pod(
        "affinity",
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In",
                 "values": ["zone-a", "zone-b"]},
                {"key": "disktype", "operator": "In", "values": ["ssd"]}]}]}}},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "batch",
                      "effect": "NoSchedule"}]),
    "required anti-affinity, 5000 running pods": lambda: pod(
        "anti",
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["app-7", "app-8"]}]},
            "topologyKey": "kubernetes.io/hostname"}]}}),
    "(extra) topology spread, zone, DoNotSchedule": lambda: pod(
        "spread", topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "app-5"}}}]),
    "preferred pod affinity": lambda: pod(
        "pref",
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "app-3"}},
                "topologyKey": "topology.kubernetes.io/zone"}}]}}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--percentage", type=int, default=0,
                        help="percentageOfNodesToScore (0 = adaptive)")
    args = parser.parse_args()
    started = time.perf_counter()
    snapshot = build(args.nodes)
    # the snapshot lives as long as the process: keep the cyclic collector from re-scanning it
    # during decisions (the running scheduler can do the same after its initial list)
    gc.collect()
    gc.freeze()
    print(f"snapshot: {args.nodes} nodes, {args.nodes} running pods, built in "
          f"{(time.perf_counter() - started) * 1000:.0f} ms")
    engine = Engine(seed=1, percentage_of_nodes_to_score=args.percentage)
    print(f"{'case':45} {'median ms':>10} {'p99 ms':>10} {'cpu med ms':>11} {'feasible':>9} "
          f"{'evaluated':>10}")
    for name, make in CASES.items():
        p = make()
        times, cpu = [], []
        decision = engine.schedule(p, snapshot)
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            decision = engine.schedule(p, snapshot)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        times.sort()
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        assert decision.node is not None, decision.message
        print(f"{name:45} {statistics.median(times):10.3f} {p99:10.3f} "
              f"{statistics.median(cpu):11.3f} {decision.feasible:9d} {decision.evaluated:10d}")


if __name__ == "__main__":
    main()
