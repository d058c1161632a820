"""Time one placement decision of the engine on a large synthetic cluster.

Four cases, each on ``--nodes`` nodes (default 5000) with as many running
pods: a plain pod; node affinity plus taints; required pod anti-affinity (some running pods
carry required anti-affinity too); preferred pod affinity. Prints the median and p99 of
``Engine.schedule`` (time.perf_counter, wall clock) over ``--runs`` decisions per case, and the
median process CPU time (less sensitive to other load on a shared machine), with the default
policy and upstream's adaptive percentageOfNodesToScore (``--percentage`` to change it).

``--stream N`` instead places a stream of N pods per workload of ``bench_scheduler.py``
(basic, anti-affinity, preferred-affinity, spread, same pod bodies) on a cluster shaped as that
benchmark's (half the nodes tainted, ten zones, 500 existing pods for basic), deciding and
assuming each pod as the running scheduler does, so every decision sees the previous ones:
the engine's part of the scheduler's CPU per pod, without the API server. It prints CPU ms per
pod and a digest of the decisions (seeded: equal digests across commits mean equal decisions).

    .venv/bin/python bench/bench_engine.py              # 5000 nodes
    .venv/bin/python bench/bench_engine.py --nodes 500  # quick
    .venv/bin/python bench/bench_engine.py --nodes 2000 --stream 1500
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from berthmaster.scheduler.config import default_profile
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.snapshot import Snapshot
from berthmaster.tooling.devcluster.nodes import fake_node

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


STREAM_WORKLOADS = ("basic", "anti-affinity", "preferred-affinity", "spread", "owned")
# "owned": basic pods of a ReplicaSet that a Service selects, so PodTopologySpread's system
# default constraints (hostname 3, zone 5, ScheduleAnyway) score them: their cost beside basic
_OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench-rs", "uid": "rs-uid",
          "controller": True}


def _owned(snapshot: Snapshot) -> None:
    selector = {"app": "bench-rs"}
    snapshot.upsert("ReplicaSet", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "bench-rs", "namespace": "bench", "uid": "rs-uid"},
        "spec": {"selector": {"matchLabels": selector}}})
    snapshot.upsert("Service", {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "bench-rs", "namespace": "bench"}, "spec": {"selector": selector}})


def bench_scheduler() -> ModuleType:
    """bench_scheduler.py beside this file (bench/ is not a package), for its pod bodies."""
    spec = importlib.util.spec_from_file_location(
        "bench_scheduler", Path(__file__).with_name("bench_scheduler.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scheduler"] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def bench_cluster(bench: ModuleType, nodes: int, existing: int) -> Snapshot:
    """The cluster bench_scheduler.py builds (create_nodes, measure), as a snapshot."""
    node_objs = []
    for i in range(nodes):
        dedicated = i % 2 == 0
        node = fake_node(
            f"bench-node-{i:05d}",
            labels={bench.POOL_LABEL: "dedicated" if dedicated else "shared"},
            taints=[{"key": bench.POOL_TAINT, "value": "bench", "effect": "NoSchedule"}]
            if dedicated else None, zone=f"zone-{(i // 2) % bench.ZONES}",
            capacity={"cpu": "64", "memory": "256Gi", "pods": "250"})
        node["metadata"].update(uid=f"n{i}", resourceVersion="1")
        node_objs.append(node)
    pods = []
    for i in range(existing):
        body = bench.pod_body(f"existing-{i}", "none", "basic", i,
                              node=f"bench-node-{i % nodes:05d}")
        body["metadata"].update(namespace="bench", uid=f"e{i}", resourceVersion="1")
        pods.append(body)
    return Snapshot.build(nodes=node_objs, pods=pods)


def stream(nodes: int, count: int, percentage: int) -> None:
    """Decide and assume ``count`` pods per workload, each on a fresh cluster."""
    bench = bench_scheduler()
    policy = default_profile()  # what the scheduler runs with no configuration
    print(f"{'workload':20} {'placed':>11} {'cpu ms/pod':>11}  decisions")
    for workload in STREAM_WORKLOADS:
        snapshot = bench_cluster(bench, nodes, 500 if workload in ("basic", "owned") else 0)
        if workload == "owned":
            _owned(snapshot)
        engine = Engine(policy, seed=1, percentage_of_nodes_to_score=percentage)
        # the scheduler's anti-affinity workload is capped at half the nodes (one pod per node)
        pods = count if workload != "anti-affinity" else min(count, nodes // 2)
        bodies = []
        for i in range(pods):
            body = bench.pod_body(f"p-{i}", "bench", "basic" if workload == "owned"
                                  else workload, i)
            body["metadata"].update(namespace="bench", uid=f"{workload}-{i}",
                                    resourceVersion="1")
            if workload == "owned":
                body["metadata"]["labels"] = {**body["metadata"].get("labels", {}),
                                              "app": "bench-rs"}
                body["metadata"]["ownerReferences"] = [_OWNER]
            bodies.append(body)
        gc.collect()
        chosen: list[str | None] = []
        started = time.process_time()
        for body in bodies:
            decision = engine.schedule(body, snapshot)
            chosen.append(decision.node)
            if decision.node:
                snapshot.assume(body, decision.node)
        cpu = time.process_time() - started
        placed = sum(1 for node in chosen if node)
        digest = hashlib.sha1(repr(chosen).encode()).hexdigest()[:12]
        print(f"{workload:20} {f'{placed}/{pods}':>11} {cpu * 1000 / pods:11.3f}  {digest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--percentage", type=int, default=0,
                        help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--stream", type=int, default=0, metavar="N",
                        help="place N pods per bench_scheduler workload instead (see above)")
    args = parser.parse_args()
    if args.stream:
        stream(args.nodes, args.stream, args.percentage)
        return
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
