"""``berthmaster demo``: the README's first command.

It brings up the local control plane, gives it the nodes of the seeds' examples (three zoned
workers, a tainted "dedicated" node, a "special hardware" node with GPUs) and prints a summary
a newcomer can read. Each step is idempotent, so running the demo twice shows the same cluster.
The cluster keeps running afterwards; the summary ends with the commands to explore and stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from berthmaster.devcluster.build import BuildError
from berthmaster.devcluster.cluster import ClusterError, ControlPlane, RunningCluster
from berthmaster.devcluster.nodes import fake_node
from berthmaster.kube import CORE, KubeClient, KubeError, resource_path

SAMPLE_NODES: list[dict[str, Any]] = [
    fake_node("worker-a", zone="us-east-1a", labels={"disktype": "ssd", "region": "east"}),
    fake_node("worker-b", zone="us-east-1b", labels={"disktype": "hdd", "region": "east"}),
    fake_node("worker-c", zone="us-east-1c", labels={"disktype": "ssd", "region": "east"}),
    fake_node("dedicated-1", zone="us-east-1a", labels={"dedicated": "groupName"},
              taints=[{"key": "dedicated", "value": "groupName", "effect": "NoSchedule"}]),
    fake_node("special-1", zone="us-east-1b",
              labels={"special": "hardware", "disktype": "ssd"},
              capacity={"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
              taints=[{"key": "special", "value": "hardware", "effect": "NoSchedule"}]),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="berthmaster", help="cluster name (default: berthmaster)")


def run(args: argparse.Namespace) -> int:
    print("berthmaster demo: a real Kubernetes control plane on this machine\n")
    try:
        cluster = ControlPlane(args.name).up()
    except (BuildError, ClusterError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(_show(cluster))
    except KubeError as error:
        print(f"error: the API server refused a demo step: {error}", file=sys.stderr)
        return 1


async def _show(cluster: RunningCluster) -> int:
    async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as kube:
        await ensure_nodes(kube, SAMPLE_NODES)
        ready = await wait_nodes_ready(kube, [n["metadata"]["name"] for n in SAMPLE_NODES])
        print()
        print(f"Control plane: {cluster.server}")
        for name, component in cluster.components.items():
            print(f"  {name:<24} pid {component.pid:<8} {component.endpoint}")
        print()
        print("Nodes (kwok fakes: Ready, heart-beating, running whatever is bound to them):")
        print(node_table(ready))
        print()
        print("Explore it:")
        print(f"  {cluster.env_line()}")
        print(f"  {cluster.binary('kubectl')} get nodes -L topology.kubernetes.io/zone")
        print("Stop it:  .venv/bin/berthmaster dev down")
    return 0


async def ensure_nodes(kube: KubeClient, nodes: list[dict[str, Any]]) -> None:
    for node in nodes:
        try:
            await kube.create(resource_path(CORE, "nodes"), node)
        except KubeError as error:
            if not error.conflict:
                raise


async def wait_nodes_ready(kube: KubeClient, names: list[str],
                           timeout: float = 60) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        listed = await kube.get(resource_path(CORE, "nodes"))
        by_name = {n["metadata"]["name"]: n for n in listed.get("items", [])}
        chosen = [by_name[name] for name in names if name in by_name]
        if all(_ready(n) for n in chosen) and len(chosen) == len(names):
            return chosen
        if loop.time() > deadline:
            late = [n["metadata"]["name"] for n in chosen if not _ready(n)]
            raise KubeError(0, "Timeout", f"nodes not Ready after {timeout:.0f}s: {late}")
        await asyncio.sleep(0.3)


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions") or [])


def node_table(nodes: list[dict[str, Any]]) -> str:
    rows = [("NAME", "STATUS", "ZONE", "CPU", "MEMORY", "EXTRA", "TAINTS")]
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        allocatable = node.get("status", {}).get("allocatable", {})
        extra = ",".join(f"{k}={v}" for k, v in sorted(allocatable.items()) if "/" in k) or "-"
        taints = ",".join(
            f"{t['key']}={t.get('value', '')}:{t['effect']}" if t.get("value")
            else f"{t['key']}:{t['effect']}"
            for t in node.get("spec", {}).get("taints") or []
        ) or "-"
        rows.append((node["metadata"]["name"], "Ready" if _ready(node) else "NotReady",
                     labels.get("topology.kubernetes.io/zone", "-"),
                     allocatable.get("cpu", "-"), allocatable.get("memory", "-"), extra, taints))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
