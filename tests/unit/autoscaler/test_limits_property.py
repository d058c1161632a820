"""Property: no sequence of scale-up decisions takes the cluster past any limit.

Each step applies the decision the way the cluster would (the new replicas register as nodes
with the template's capacity), adds fresh pending pods, and decides again; after every step the
node count, cores, memory and GPUs stay within the ClusterAutoscaler maximums (when they started
within them) and every MachineSet within its max size.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.operator.autoscaler.config import (
    AutoscalerConfig,
    GpuLimit,
    ResourceLimits,
    ResourceRange,
)
from berthmaster.operator.autoscaler.groups import build_cluster_view
from berthmaster.operator.autoscaler.limits import GIB, Totals, cluster_totals
from berthmaster.operator.autoscaler.resources import pod_requests
from berthmaster.operator.autoscaler.scaleup import decide_scale_up, pods_to_help
from berthmaster.operator.autoscaler.simulation import Simulation
from tests.unit.autoscaler.builders import (
    fits,
    make_machine,
    make_machine_set,
    make_node,
    make_pod,
)

JSON = dict[str, Any]


def maximums_passed(totals: Totals, limits: ResourceLimits) -> list[str]:
    """The test's oracle: the maximums ``totals`` passes (empty when all are respected)."""
    passed = []
    if limits.max_nodes_total and totals.nodes > limits.max_nodes_total:
        passed.append("nodes")
    if limits.cores is not None and totals.cores > limits.cores.max:
        passed.append("cpu")
    if limits.memory_gib is not None and totals.memory > limits.memory_gib.max * GIB:
        passed.append("memory")
    for gpu in limits.gpus:
        if totals.gpus.get(gpu.type, 0.0) > gpu.max:
            passed.append(gpu.type)
    return passed

group_shapes = st.lists(
    st.tuples(st.sampled_from(["2", "4", "8"]), st.sampled_from(["4Gi", "8Gi", "32Gi"]),
              st.integers(0, 2), st.integers(1, 6)),
    min_size=1, max_size=3)
limits_strategy = st.builds(
    ResourceLimits,
    max_nodes_total=st.one_of(st.none(), st.integers(1, 12)),
    cores=st.one_of(st.none(), st.integers(4, 60).map(lambda m: ResourceRange(0, m))),
    memory_gib=st.one_of(st.none(), st.integers(8, 200).map(lambda m: ResourceRange(0, m))),
    gpus=st.one_of(st.just(()), st.integers(1, 6).map(
        lambda m: (GpuLimit("nvidia.com/gpu", 0, m),))),
)
waves = st.lists(st.lists(st.tuples(st.sampled_from(["500m", "1", "3", "7"]),
                                    st.sampled_from(["256Mi", "2Gi", "6Gi"]),
                                    st.booleans()),
                          min_size=1, max_size=6), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(shapes=group_shapes, limits=limits_strategy, pod_waves=waves,
       expanders=st.sampled_from([("LeastWaste",), ("MostPods",), ("Random",)]),
       balance=st.booleans(), seed=st.integers(0, 1000))
def test_no_decision_sequence_exceeds_a_limit(
        shapes: list[tuple[str, str, int, int]], limits: ResourceLimits,
        pod_waves: list[list[tuple[str, str, bool]]], expanders: tuple[str, ...], balance: bool,
        seed: int) -> None:
    config = AutoscalerConfig(limits=limits, expanders=expanders,
                              balance_similar_node_groups=balance)
    rng = random.Random(seed)
    control_plane = make_node("control-plane-0", cpu="4", memory="8Gi")
    nodes: list[JSON] = [control_plane]
    machines: list[JSON] = []
    replicas = {f"g{i}": 0 for i in range(len(shapes))}
    pods: list[JSON] = []
    if maximums_passed(cluster_totals(nodes, limits), limits):
        return  # a cluster already outside its range is not corrected, only not made worse
    serial = 0
    for wave in pod_waves:
        for cpu, memory, gpu in wave:
            serial += 1
            pod = make_pod(f"p{serial}", cpu=cpu, memory=memory, unschedulable=True)
            if gpu:
                pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
            pods.append(pod)
        machine_sets = []
        for i, (cpu, memory, gpus, max_size) in enumerate(shapes):
            extra = {"capacity.cluster-autoscaler.kubernetes.io/gpu-count": str(gpus)} if gpus \
                else {}
            machine_sets.append(make_machine_set(f"g{i}", replicas[f"g{i}"], max_size=max_size,
                                                 cpu=cpu, memory=memory, annotations=extra))
        view = build_cluster_view(machine_sets, machines, nodes)
        sim = Simulation.build(fits, nodes, pods)
        upcoming = [(g.template, g.upcoming) for g in view.groups if g.template is not None]
        totals = cluster_totals(nodes, limits, upcoming)
        pending, _ = pods_to_help(pods, config.pod_priority_threshold)
        decision = decide_scale_up(pending, view, sim, config, totals, (), rng)
        for increase in decision.increases:
            group = view.group(increase.group_id)
            assert group is not None and group.template is not None
            assert increase.new <= group.max_size
            name = group.name
            for index in range(replicas[name], increase.new):
                node = make_node(f"{name}-{index}")
                node["status"] = group.template["status"]
                nodes.append(node)
                machines.append(make_machine(f"{name}-m{index}", name, f"{name}-{index}"))
            replicas[name] = increase.new
        passed = maximums_passed(cluster_totals(nodes, limits), limits)
        assert not passed, f"limits {passed} passed after {decision.increases}"


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 3)), min_size=1, max_size=3),
       loads=st.lists(st.sampled_from(["0", "100m", "500m", "1500m", "3"]), min_size=1,
                      max_size=15),
       min_cores=st.integers(0, 40), min_memory=st.integers(0, 100), rounds=st.integers(1, 4))
def test_no_scale_down_sequence_goes_below_a_minimum(
        sizes: list[tuple[int, int]], loads: list[str], min_cores: int, min_memory: int,
        rounds: int) -> None:
    from berthmaster.operator.autoscaler.scaledown import find_unneeded, select_removals

    limits = ResourceLimits(cores=ResourceRange(min_cores, 1000),
                            memory_gib=ResourceRange(min_memory, 1000))
    config = AutoscalerConfig(limits=limits)
    nodes = [make_node("control-plane-0")]
    machines: list[JSON] = []
    replicas: dict[str, int] = {}
    minimum: dict[str, int] = {}
    for g, (count, low) in enumerate(sizes):
        name = f"g{g}"
        replicas[name], minimum[name] = count, min(low, count)
        for i in range(count):
            nodes.append(make_node(f"{name}-{i}"))
            machines.append(make_machine(f"{name}-m{i}", name, f"{name}-{i}"))
    pods = []
    load: dict[str, int] = {}
    for i, cpu in enumerate(loads):
        target = nodes[i % len(nodes)]["metadata"]["name"]
        amount = pod_requests(make_pod("probe", cpu=cpu)).get("cpu", 0)
        if cpu != "0" and load.get(target, 0) + amount <= 4000:  # start from a valid cluster
            load[target] = load.get(target, 0) + amount
            pods.append(make_pod(f"p{i}", cpu=cpu, node=target))
    start = cluster_totals(nodes, limits)
    start_ok = start.cores >= min_cores and start.memory >= min_memory * 2**30
    for _ in range(rounds):
        machine_sets = [make_machine_set(n, replicas[n], min_size=minimum[n], max_size=10)
                        for n in replicas]
        view = build_cluster_view(machine_sets, machines, nodes)
        sim = Simulation.build(fits, nodes, pods)
        by_node: dict[str, list[JSON]] = {}
        for pod in pods:
            by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
        plan = find_unneeded(nodes, by_node, view, sim, config, [],
                             cluster_totals(nodes, limits))
        removals = select_removals(plan, {u.node: 0.0 for u in plan.unneeded}, 1e9, config)
        gone = {u.node for u in removals}
        for removal in removals:
            replicas[removal.group_id.split("/")[1]] -= 1
        # Pods of removed nodes land where the simulation put them.
        placed = {v.uid: v.node_name for v in sim.snapshot.assigned_pods()}
        pods = [{**p, "spec": {**p["spec"], "nodeName": placed[p["metadata"]["uid"]]}}
                if p["spec"]["nodeName"] in gone else p for p in pods]
        nodes = [n for n in nodes if n["metadata"]["name"] not in gone]
        machines = [m for m in machines if m["status"]["nodeRef"]["name"] not in gone]
        assert all(p["spec"]["nodeName"] not in gone for p in pods)
        used: dict[str, int] = {}
        for p in pods:
            used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + \
                pod_requests(p).get("cpu", 0)
        assert all(amount <= 4000 for amount in used.values()), used  # 4-core nodes
        assert all(replicas[n] >= minimum[n] for n in replicas)
        totals = cluster_totals(nodes, limits)
        if start_ok:
            assert totals.cores >= min_cores
            assert totals.memory >= min_memory * 2**30
