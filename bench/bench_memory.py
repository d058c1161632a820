"""Benchmark: what the scheduler's cache holds per node and per pod, without an API server.

Builds ``--nodes`` kwok-shaped nodes and runs ``--pods`` pods of ``bench_scheduler.py``'s basic
workload through the path the running scheduler takes (``scheduler/daemon``): each pod
arrives pending (trimmed, as the informer trims it, and upserted), is assumed on a node,
and the watch's bound version (a new resourceVersion) confirms it; then every other pod is
deleted. Prints the bytes left allocated per cached node and per live pod (tracemalloc, on
500 nodes and 5,000 pods), and the process's resident memory over the nodes at the asked size
after the deletions: the figures the trimming, the view caches and the snapshot's indexes
decide.

    .venv/bin/python bench/bench_memory.py                  # 2,000 nodes, 20,000 pods
    .venv/bin/python bench/bench_memory.py --nodes 5000 --pods 40000
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from berthmaster.scheduler.daemon.trim import trim_node, trim_pod
from berthmaster.scheduler.snapshot import Snapshot
from berthmaster.tooling.devcluster.nodes import fake_node


def bench_scheduler() -> ModuleType:
    """bench_scheduler.py, for its pod bodies (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "bench_scheduler", Path(__file__).with_name("bench_scheduler.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scheduler"] = module
    spec.loader.exec_module(module)
    return module


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def make_nodes(snapshot: Snapshot, count: int) -> None:
    for i in range(count):
        node = fake_node(f"bench-node-{i:05d}", zone=f"zone-{(i // 2) % 10}",
                         capacity={"cpu": "64", "memory": "256Gi", "pods": "250"})
        node["metadata"].update(uid=f"n{i}", resourceVersion="1")
        snapshot.upsert_node(trim_node(node))


def run_pods(snapshot: Snapshot, bench: ModuleType, count: int, nodes: int) -> int:
    """Pending, assumed, confirmed bound; then every other pod deleted. Returns those left."""
    for i in range(count):
        body = bench.pod_body(f"p-{i}", "bench", "basic", i)
        body["metadata"].update(namespace="bench", uid=f"u{i}", resourceVersion="1",
                                creationTimestamp="2026-01-01T00:00:00Z")
        pending = trim_pod(body)
        snapshot.upsert_pod(pending)  # ADDED, pending
        node = f"bench-node-{i % nodes:05d}"
        snapshot.assume(pending, node)
        bound = copy.deepcopy(pending)  # the watch's MODIFIED: bound, a new version
        bound["spec"]["nodeName"] = node
        bound["metadata"]["resourceVersion"] = "2"
        bound["status"] = {"phase": "Pending"}
        if not snapshot.confirm(bound):
            snapshot.upsert_pod(bound)
    for i in range(0, count, 2):
        snapshot.remove_pod(f"u{i}")
    return count - (count + 1) // 2


def traced(action: Callable[[], int]) -> float:
    """Bytes the action leaves allocated per unit it returns (after a full collection)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    units = action()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / max(1, units)


def per_object(bench: ModuleType) -> tuple[float, float]:
    """Bytes per node and per live pod, on a small cluster of their own, traced."""
    sample = Snapshot()
    per_node = traced(lambda: (make_nodes(sample, 500), 500)[1])
    return per_node, traced(lambda: run_pods(sample, bench, 5000, 500))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=20000)
    args = parser.parse_args()
    bench = bench_scheduler()
    per_node, per_pod = per_object(bench)
    # resident memory at the asked size, untraced
    snapshot = Snapshot()
    make_nodes(snapshot, args.nodes)
    gc.collect()
    base = rss_mib()
    live = run_pods(snapshot, bench, args.pods, args.nodes)
    gc.collect()
    print(f"{per_node:,.0f} bytes per cached node, {per_pod:,.0f} bytes per live pod "
          "(Python objects, tracemalloc)")
    print(f"{args.nodes} nodes, {args.pods} pods of which {live} left: "
          f"{rss_mib() - base:.0f} MiB resident over the nodes")


if __name__ == "__main__":
    main()
