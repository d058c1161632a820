"""``berthmaster demo``: the README's first command.

It brings up the local control plane, gives it the nodes of the seeds' examples (three zoned
workers, a tainted "dedicated" node, a "special hardware" node with GPUs), starts the berthmaster
scheduler and operator beside it (recorded with the cluster, so ``berthmaster dev down`` stops
them too),
creates the sample workloads of ``deploy/samples/demo.yaml`` in a fresh namespace and prints,
for each pod, what it asks for, where it landed and what the scheduler said — all read back from
the API server; then a MachineSet grows kwok Machines and a Machine is held by its preDrain hook
(berthmaster.tooling.demo_machines), and, when this host can run one, a real node joins as a
Machine of
the kubelet provider and runs a pod (berthmaster.tooling.demo_real_node). Running the demo twice
recreates the namespace and its objects.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling import demo_real_node as real_node
from berthmaster.tooling.demo_admission import dedicated_story
from berthmaster.tooling.demo_machines import install_machine_api, machine_story
from berthmaster.tooling.devcluster.build import BuildError
from berthmaster.tooling.devcluster.cluster import ClusterError, ControlPlane, RunningCluster
from berthmaster.tooling.devcluster.nodes import fake_node
from berthmaster.tooling.devcluster.ports import free_port
from berthmaster.tooling.python import BERTHMASTER_CLI

NAMESPACE = "berthmaster-demo"
SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "samples" / "demo.yaml"
RULE = "berthmaster.io/demo-rule"
PHASE = "berthmaster.io/demo-phase"

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
    plane = ControlPlane(args.name)
    try:
        cluster = plane.up()
        start_scheduler(plane, cluster)
        install_machine_api(cluster)
        real_node_problems = real_node.host_problems(plane)
        start_operator(plane, cluster,
                       None if real_node_problems else real_node.operator_env(plane))
        start_admission(plane, cluster)
    except (BuildError, ClusterError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(_show(cluster, real_node_problems))
    except KubeError as error:
        print(f"error: the API server refused a demo step: {error}", file=sys.stderr)
        return 1


async def _show(cluster: RunningCluster, real_node_problems: list[str]) -> int:
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
        print(f"Placing the sample pods of {SAMPLES.name} with the berthmaster scheduler ...")
        placements = await place_samples(kube)
        print()
        print(placement_table(placements))
        print()
        print("Machines with the berthmaster operator (kwok provider: instances are fake Nodes):")
        for line in await machine_story(kube, NAMESPACE):
            print(f"  {line}")
        print()
        if real_node_problems:
            print("A real node: skipped, this host cannot run one: "
                  + "; ".join(real_node_problems))
        else:
            print("A real node beside them (kubelet provider: the instance is a kubelet and "
                  "containerd on this host):")
            for line in await real_node.real_node_story(kube, cluster, NAMESPACE):
                print(f"  {line}")
        print()
        print("Dedicated nodes with berthmaster's placement admission webhook:")
        for line in await dedicated_story(kube):
            print(f"  {line}")
        print()
        print("Explore it:")
        print(f"  {cluster.env_line()}")
        print(f"  {cluster.binary('kubectl')} get nodes -L topology.kubernetes.io/zone")
        print(f"  kubectl -n {NAMESPACE} get events --field-selector source=berthmaster")
        print("  berthmaster simulate --help   (the same decisions, offline, on a snapshot file)")
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


def start_scheduler(plane: ControlPlane, cluster: RunningCluster) -> None:
    """Run ``berthmaster scheduler`` beside the cluster, recorded so ``dev down`` stops it."""
    port = free_port()
    command = [*BERTHMASTER_CLI, "scheduler",
               "--kubeconfig", str(cluster.kubeconfig), "--no-leader-elect",
               "--metrics-bind-address", f"127.0.0.1:{port}", "--log-format", "text"]
    plane.attach(cluster, "berthmaster-scheduler", command, f"http://127.0.0.1:{port}",
                 lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"))


def start_operator(plane: ControlPlane, cluster: RunningCluster,
                   env: dict[str, str] | None = None) -> None:
    """Run ``berthmaster operator`` beside the cluster, recorded so ``dev down`` stops it;
    ``env`` adds to its environment (the kubelet provider's settings)."""
    port = free_port()
    command = [*BERTHMASTER_CLI, "operator",
               "--kubeconfig", str(cluster.kubeconfig), "--standalone",
               "--liveness", f"http://127.0.0.1:{port}/healthz"]
    plane.attach(cluster, "berthmaster-operator", command, f"http://127.0.0.1:{port}",
                 lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"), env=env)


def start_admission(plane: ControlPlane, cluster: RunningCluster) -> None:
    """Run ``berthmaster admission`` on loopback beside the cluster, recorded so ``dev down``
    stops it. It keeps its certificate in a Secret and registers its configurations itself,
    with ``Ignore``: a stopped demo never blocks the cluster's pods."""
    port = free_port()
    command = [*BERTHMASTER_CLI, "admission",
               "--kubeconfig", str(cluster.kubeconfig), "--listen", f"127.0.0.1:{free_port()}",
               "--failure-policy", "Ignore", "--metrics-bind-address", f"127.0.0.1:{port}",
               "--log-format", "text"]
    plane.attach(cluster, "berthmaster-admission", command, f"http://127.0.0.1:{port}",
                 lambda: _http_ok(f"http://127.0.0.1:{port}/readyz"))


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, OSError):
        return False


async def place_samples(kube: KubeClient, timeout: float = 60) -> list[dict[str, Any]]:
    """Create the sample objects in a fresh namespace and wait for every decision."""
    documents = [d for d in yaml.safe_load_all(SAMPLES.read_text()) if d]
    await _fresh_namespace(kube)
    scheduling = group_path("scheduling.k8s.io", "v1")
    pods = [d for d in documents if d["kind"] == "Pod"]
    for document in documents:
        if document["kind"] == "PriorityClass":
            try:
                await kube.create(resource_path(scheduling, "priorityclasses"), document)
            except KubeError as error:
                if not error.conflict:
                    raise
    for phase in ("1", "2"):
        batch = [p for p in pods if p["metadata"].get("annotations", {}).get(PHASE, "1") == phase]
        for pod in batch:
            await kube.create(resource_path(CORE, "pods", NAMESPACE), pod)
        await _wait_decided(kube, [p["metadata"]["name"] for p in batch], timeout)
    await asyncio.sleep(1)  # let the last events land
    return await _read_back(kube, pods)


async def _fresh_namespace(kube: KubeClient) -> None:
    path = resource_path(CORE, "namespaces", name=NAMESPACE)
    try:
        await kube.delete(path)
    except KubeError as error:
        if not error.not_found:
            raise
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        try:
            await kube.get(path)
        except KubeError as error:
            if error.not_found:
                break
            raise
        if loop.time() > deadline:
            raise KubeError(0, "Timeout", f"namespace {NAMESPACE} still terminating after 60s")
        await asyncio.sleep(0.5)
    await kube.create(resource_path(CORE, "namespaces"), {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    while True:  # pods are refused until the default service account exists
        try:
            await kube.get(resource_path(CORE, "serviceaccounts", NAMESPACE, "default"))
            return
        except KubeError:
            await asyncio.sleep(0.3)


def _decided(pod: dict[str, Any]) -> bool:
    if pod["spec"].get("schedulerName") != "berthmaster" or pod["spec"].get("nodeName"):
        return True
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in pod.get("status", {}).get("conditions") or [])


async def _wait_decided(kube: KubeClient, names: list[str], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        listed = await kube.get(resource_path(CORE, "pods", NAMESPACE))
        by_name = {p["metadata"]["name"]: p for p in listed.get("items", [])}
        if all(name not in by_name or _decided(by_name[name]) for name in names):
            # A preempting pod is decided once it is bound, not while it waits for victims.
            nominated = [p for p in by_name.values()
                         if p.get("status", {}).get("nominatedNodeName")
                         and not p["spec"].get("nodeName")]
            if not nominated:
                return
        await asyncio.sleep(0.3)


async def _read_back(kube: KubeClient, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    listed = await kube.get(resource_path(CORE, "pods", NAMESPACE))
    live = {p["metadata"]["name"]: p for p in listed.get("items", [])}
    events = (await kube.get(resource_path(CORE, "events", NAMESPACE))).get("items", [])
    # Timestamps have one-second resolution, so show the event that ends a pod's story.
    rank = {"FailedScheduling": 1, "Scheduled": 2, "Preempted": 3}
    said: dict[str, str] = {}
    for event in sorted(events, key=lambda e: rank.get(e.get("reason", ""), 0)):
        said[event.get("involvedObject", {}).get("name", "")] = (
            f"{event.get('reason')}: {event.get('message', '')}")
    rows = []
    for sample in samples:
        name = sample["metadata"]["name"]
        pod = live.get(name)
        rows.append({
            "pod": name,
            "priority": sample["spec"].get("priorityClassName", "-"),
            "asks": sample["metadata"].get("annotations", {}).get(RULE, ""),
            "node": (pod or {}).get("spec", {}).get("nodeName") or ("(deleted)" if pod is None
                                                                     else "-"),
            "says": said.get(name) or _condition_message(pod) or (
                "no event: not berthmaster's pod" if sample["spec"].get("schedulerName")
                != "berthmaster" else "no decision yet"),
        })
    return rows


def _condition_message(pod: dict[str, Any] | None) -> str:
    for condition in (pod or {}).get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason')}: {condition.get('message', '')}"
    return ""


def placement_table(rows: list[dict[str, Any]]) -> str:
    header = {"pod": "POD", "priority": "PRIORITY", "asks": "ASKS FOR", "node": "NODE",
              "says": "WHAT THE SCHEDULER SAID"}
    columns = list(header)
    table = [header, *rows]
    widths = {c: max(len(str(r[c])) for r in table) for c in columns[:-1]}
    lines = []
    for row in table:
        cells = [str(row[c]).ljust(widths[c]) for c in columns[:-1]] + [str(row["says"])]
        lines.append("  " + "  ".join(cells))
    return "\n".join(lines)
