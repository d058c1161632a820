"""Benchmark: one scale-up decision with N nodes and 30 pending pods, with and without pod
anti-affinity among the pending pods.

The cluster: N registered nodes (4 cores, 16Gi) spread over three autoscaled MachineSets and
three zones, each running 10 pods that leave too little room for a pending pod, so every pending
pod is tried against every node before the node groups are simulated. Printed: the time to
build the placement snapshot and the time of the decision itself (``decide_scale_up``), the
chosen increase, and upstream's budget for comparison (cluster-autoscaler's scan interval is
10 s and it is documented to handle 1,000 nodes x 30 pods/node within 60 s per loop; with
inter-pod affinity it is far slower, see its FAQ).

    python bench/bench_autoscaler.py            # 200 nodes (quick)
    python bench/bench_autoscaler.py --full     # 1,000 nodes, the issue's size
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.groups import MAX_SIZE_KEY, MIN_SIZE_KEY, build_cluster_view
from berthmaster.operator.autoscaler.limits import cluster_totals
from berthmaster.operator.autoscaler.loop import default_placement
from berthmaster.operator.autoscaler.scaleup import decide_scale_up, pods_to_help
from berthmaster.operator.autoscaler.simulation import Simulation

JSON = dict[str, Any]
GROUPS = ("a", "b", "c")


def node(name: str, group: str) -> JSON:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                         "labels": {"kubernetes.io/hostname": name, "pool": "workers",
                                    "topology.kubernetes.io/zone": f"zone-{group}"}},
            "spec": {}, "status": {"capacity": capacity, "allocatable": capacity,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str, node_name: str | None = None, anti_affinity: bool = False) -> JSON:
    spec: JSON = {"containers": [{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": cpu, "memory": "256Mi"}}}], "nodeSelector": {"pool": "workers"}}
    labels = {"app": "pending" if node_name is None else f"app-{name.split('-')[1]}"}
    if node_name:
        spec["nodeName"] = node_name
    if anti_affinity:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "pending"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    status: JSON = {"phase": "Running"} if node_name else {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}",
                         "resourceVersion": "1", "labels": labels,
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs",
                                              "controller": True}]},
            "spec": spec, "status": status}


def machine_set(group: str, replicas: int) -> JSON:
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
            "metadata": {"name": group, "namespace": "machines", "annotations": {
                MIN_SIZE_KEY: "0", MAX_SIZE_KEY: str(replicas + 100)}},
            "spec": {"replicas": replicas, "template": {"spec": {
                "metadata": {"labels": {"pool": "workers",
                                        "topology.kubernetes.io/zone": f"zone-{group}"}},
                "providerSpec": {"value": {"capacity": {"cpu": "4", "memory": "16Gi",
                                                        "pods": "110"}}}}}}}


def machine(name: str, group: str) -> JSON:
    return {"metadata": {"name": f"m-{name}", "namespace": "machines",
                         "ownerReferences": [{"kind": "MachineSet", "name": group}]},
            "status": {"nodeRef": {"name": name}}}


def run(size: int, pending: int, anti_affinity: bool) -> None:
    nodes, pods, machines = [], [], []
    per_group = {g: 0 for g in GROUPS}
    for index in range(size):
        group = GROUPS[index % len(GROUPS)]
        name = f"node-{index}"
        nodes.append(node(name, group))
        machines.append(machine(name, group))
        per_group[group] += 1
        for slot in range(10):  # 10 x 350m: 3.5 of 4 cores used, no room for a 1-core pod
            pods.append(pod(f"p-{index}-{slot}", "350m", name))
    pods.extend(pod(f"pending-{i}", "1", anti_affinity=anti_affinity) for i in range(pending))
    machine_sets = [machine_set(g, n) for g, n in per_group.items()]
    config = AutoscalerConfig()
    placement = default_placement()

    started = time.perf_counter()
    view = build_cluster_view(machine_sets, machines, nodes)
    sim = Simulation.build(placement, nodes, pods)
    totals = cluster_totals(nodes, config.limits)
    wanted, _ = pods_to_help(pods, config.pod_priority_threshold)
    built = time.perf_counter() - started

    started = time.perf_counter()
    decision = decide_scale_up(wanted, view, sim, config, totals, (), random.Random(0))
    decided = time.perf_counter() - started
    label = "with anti-affinity" if anti_affinity else "no affinity     "
    increases = ", ".join(f"{i.group_id} {i.current}->{i.new}" for i in decision.increases)
    print(f"{size:5d} nodes x {len(pods) - pending:5d} running, {pending} pending, {label}: "
          f"snapshot {built:6.2f} s, decision {decided:6.2f} s  [{increases}]  "
          f"(target <= 10 s; cluster-autoscaler budget 60 s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="1,000 nodes (the issue's size)")
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--pending", type=int, default=30)
    args = parser.parse_args(argv)
    size = args.nodes or (1000 if args.full else 200)
    try:
        default_placement()
    except ImportError as error:
        print(f"the placement engine is not importable yet: {error}", file=sys.stderr)
        return 2
    for anti_affinity in (False, True):
        run(size, args.pending, anti_affinity)
    return 0


if __name__ == "__main__":
    sys.exit(main())
