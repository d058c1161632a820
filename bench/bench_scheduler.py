"""Benchmark: berthmaster's scheduler side by side with kube-scheduler and a bind-only ceiling.

One local control plane (or ``--kubeconfig`` for an existing one), one set of kwok nodes, and
for each workload, each scheduler in turn as a separate process:

- ``stub``: binds pending pods round-robin with no placement at all — the ceiling ``R_ceil``
  this API server, this harness and this machine allow. It uses berthmaster's HTTP client
  (raw JSON, no models) with at least berthmaster's bind concurrency and connection pool, and
  does nothing but bind; the report checks, per workload, that it was at least as fast as every
  scheduler of the run and says so plainly when it was not (then ``x R_ceil`` means nothing);
- ``berthmaster``: ``berthmaster scheduler`` with no configuration (kube-scheduler 1.35's
  default profile, as kube-scheduler runs), client QPS lifted;
- ``kube-scheduler``: the binary the local control plane builds, profile schedulerName
  ``kube-scheduler-bench``, at its default client QPS (50/100);
- ``kube-scheduler-lifted``: the same with QPS/burst lifted;
- ``berthmaster-plugin`` (with ``--plugin-overhead``, not by default): ``berthmaster`` with the
  default profile plus one trivial out-of-tree Filter and Score, ``BenchTrivial``
  (bench/trivial_plugin: a Filter that passes every node, never skipped at PreFilter, and a
  Score that reads one node label), found through the ``berthmaster.plugins`` entry point group
  as an installed plugin is: ``bench/trivial_plugin`` holds its ``*.dist-info`` and goes on the
  scheduler's ``PYTHONPATH``, and ``--config`` enables it (docs/plugins.md). The report gives,
  per workload, both runs' pods/s and the plugin API's cost per pod,
  ``1/pods_s(plugin) - 1/pods_s(berthmaster)`` in ms. Not run on the gang workloads (their
  configuration is Coscheduling's).

Workloads (as kube-scheduler's scheduler_perf): ``basic`` (existing pods pre-bound, then the
measured ones), ``affinity-taints`` (required node affinity to a tainted pool, tolerated),
``anti-affinity`` (required pod anti-affinity on hostname: one pod per node, so the measured
count is capped at the node count), ``preferred-affinity`` (preferred pod affinity) and
``spread`` (topology spread over zones, maxSkew 1, DoNotSchedule), and ``gang-8`` and
``gang-64`` (PodGroups of 8 or 64 pods, ``minMember`` the whole group, scheduler-plugins'
PodGroup API: berthmaster runs them with its Coscheduling plugin enabled, docs/coscheduling.md;
kube-scheduler has no gang plugin, so only the stub, which ignores the groups, runs beside it).

Measured per run: pods/s (first create to last bind), create-to-bind p50/p99 (client-side
clocks: POST sent -> the watch shows spec.nodeName), the scheduler's CPU seconds per pod
(utime+stime over the measured phase) and peak RSS, plus the initial sync of every scheduler
(process start to its first bind, a warm-up pod) and berthmaster's own cache sync time (from its
log). ``--rate R`` creates pods at R pods/s instead of as fast as possible (the
latency goal is p99 at 100 pods/s). Defaults are small so a run takes a few minutes on a
laptop; ``--full`` is the issue's size (5,000 nodes, 1,000 existing + 10,000 measured pods).

    .venv/bin/python bench/bench_scheduler.py                 # small, all schedulers/workloads
    .venv/bin/python bench/bench_scheduler.py --full          # the issue's size
    .venv/bin/python bench/bench_scheduler.py --workloads basic --rate 100
    .venv/bin/python bench/bench_scheduler.py --workloads basic --plugin-overhead \
        --schedulers stub,berthmaster,kube-scheduler

Before the first measured run the stub places ``--warm-up`` pods (a fifth of ``--pods``, at
most 2,000), unreported: a fresh API server is slower for its first minutes and would handicap
whichever scheduler ran first. Every run starts once every node is Ready, and its line says how
many nodes were lost by its end and how long creating its pods took (when that is most of the
run, the harness, not the scheduler, set the rate). The kwok nodes' leases are lengthened above
500 nodes (``--node-lease-seconds``), so their renewals stay at 50 a second.

``--backlog`` creates each run's pods before its scheduler starts and measures binding alone:
pods/s from the first bind to the last, CPU from the first bind on (the sync is left out; its
start-to-first-bind line still says how long it took), create-to-bind latency including the
wait for the scheduler. Then no pod creation runs beside the binds, and the stub is the
ceiling of this API server and machine, not of the harness.

``--sync N`` measures the initial sync alone, side by side: N pods bound round-robin to the
nodes are created once, then each scheduler in turn starts, binds one warm-up pod (process start
to that bind is its sync) and is stopped; reported with its memory (VmRSS after the bind and
VmHWM, the peak) and the CPU seconds it spent to get there.

    .venv/bin/python bench/bench_scheduler.py --nodes 5000 --sync 20000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from berthmaster.foundation.documents import safe_load
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.daemon.flags import add_arguments
from berthmaster.tooling.devcluster.nodes import fake_node
from berthmaster.tooling.devcluster.schedulers import (
    Proc,
    kube_scheduler_config,
    start_kube_scheduler,
)
from berthmaster.tooling.python import BERTHMASTER_CLI

JSON = dict[str, Any]
WORKLOADS = ("basic", "affinity-taints", "anti-affinity", "preferred-affinity", "spread",
             "gang-8", "gang-64")
# the gang workloads' group sizes; each PodGroup's minMember is the whole group
GANG_SIZES = {"gang-8": 8, "gang-64": 64}
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
ROOT = Path(__file__).resolve().parents[1]
PODGROUP_CRD = ROOT / "deploy/crds/scheduling.x-k8s.io_podgroups.yaml"
GANG_EXAMPLE = ROOT / "examples/coscheduling/scheduler-config.yaml"
SCHEDULERS = ("stub", "berthmaster", "kube-scheduler", "kube-scheduler-lifted")
PLUGIN_RUN = "berthmaster-plugin"  # berthmaster plus BenchTrivial: --plugin-overhead
KNOWN_SCHEDULERS = (*SCHEDULERS, PLUGIN_RUN)
TRIVIAL_PLUGIN_PATH = ROOT / "bench/trivial_plugin"  # its *.dist-info: the entry point
TRIVIAL_PLUGIN = "BenchTrivial"
LIFTED_QPS, LIFTED_BURST = 5000, 10000
SCHEDULER_NAMES = {"stub": "bench-stub", "berthmaster": "berthmaster-bench",
                   PLUGIN_RUN: "berthmaster-plugin-bench"}
KUBE_SCHEDULER_NAME = "kube-scheduler-bench"  # both kube-scheduler runs


def scheduler_name(kind: str) -> str:
    """The schedulerName a run of scheduler ``kind`` places pods for."""
    return SCHEDULER_NAMES.get(kind, KUBE_SCHEDULER_NAME)
POOL_LABEL, POOL_TAINT = "bench.berthmaster.io/pool", "bench.berthmaster.io/dedicated"
ZONES = 10


# ---- the bind-only stub (runs as its own process: --run-stub) ---------------------------------
def berthmaster_bind_concurrency(extra: Sequence[str] = ()) -> int:
    """The bind concurrency berthmaster runs with under ``extra`` flags (its default else)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    known, _ = parser.parse_known_args(list(extra))
    return int(known.bind_concurrency)


async def run_stub(kubeconfig: str, name: str, concurrency: int) -> None:
    # the pool berthmaster's scheduler opens for this concurrency (daemon/service.py)
    kube = await KubeClient.from_kubeconfig(kubeconfig, pool_size=max(64, concurrency * 2))
    nodes, _ = await kube.list_all(resource_path(CORE, "nodes"))
    names = [n["metadata"]["name"] for n in nodes
             if not (n.get("spec") or {}).get("taints")] or [n["metadata"]["name"] for n in nodes]
    slots = asyncio.Semaphore(concurrency)
    turn = 0
    selector = f"spec.schedulerName={name},spec.nodeName="
    path = resource_path(CORE, "pods")
    tasks: set[asyncio.Task[None]] = set()

    async def bind(pod: JSON, node: str) -> None:
        meta = pod["metadata"]
        async with slots:
            with contextlib.suppress(KubeError):
                await kube.create(resource_path(CORE, "pods", meta["namespace"], meta["name"],
                                                "binding"),
                                  {"apiVersion": "v1", "kind": "Binding",
                                   "metadata": {"name": meta["name"], "uid": meta["uid"]},
                                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def dispatch(pod: JSON) -> None:
        nonlocal turn
        task = asyncio.create_task(bind(pod, names[turn % len(names)]))
        turn += 1
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    pending, version = await kube.list_all(path, fieldSelector=selector)
    for pod in pending:
        dispatch(pod)
    while True:
        try:
            async for event in kube.watch(path, version, fieldSelector=selector):
                version = event["object"]["metadata"].get("resourceVersion", version)
                if event["type"] == "ADDED":
                    dispatch(event["object"])
        except KubeError as error:
            if error.gone:
                pending, version = await kube.list_all(path, fieldSelector=selector)
                for pod in pending:
                    dispatch(pod)


# ---- workloads ------------------------------------------------------------------------------
def pod_body(name: str, scheduler: str, workload: str, index: int, node: str | None = None
             ) -> JSON:
    labels = {"bench": workload, "app": f"{workload}-app"}
    spec: JSON = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
    }
    if node:
        spec["nodeName"] = node
    if workload == "affinity-taints":
        spec["tolerations"] = [{"key": POOL_TAINT, "operator": "Exists",
                                "effect": "NoSchedule"}]
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": POOL_LABEL, "operator": "In", "values": ["dedicated"]}]}]}}}
    elif workload == "anti-affinity":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": labels["app"]}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    elif workload == "preferred-affinity":
        labels["color"] = f"c{index % 10}"
        spec["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"color": labels["color"]}},
                "topologyKey": "kubernetes.io/hostname"}}]}}
    elif workload in GANG_SIZES:
        labels[POD_GROUP_LABEL] = f"g-{index // GANG_SIZES[workload]}"
    elif workload == "spread":
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": labels["app"]}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": spec}


async def create_nodes(kube: KubeClient, count: int) -> list[str]:
    existing, _ = await kube.list_all(resource_path(CORE, "nodes"), labelSelector="type=kwok")
    names = sorted(n["metadata"]["name"] for n in existing
                   if n["metadata"]["name"].startswith("bench-node-"))
    want = [f"bench-node-{i:05d}" for i in range(count)]
    missing = [n for n in want if n not in set(names)]
    slots = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        index = int(name.rsplit("-", 1)[1])
        # Every zone gets both pools. (With zone = index % 10, the tainted pool held whole
        # zones: under the default nodeTaintsPolicy Ignore those zones are empty spread domains,
        # so upstream semantics allow one spread pod per untainted zone and the spread workload
        # could bind 5 pods in all, with any scheduler.)
        dedicated = index % 2 == 0
        labels = {POOL_LABEL: "dedicated" if dedicated else "shared"}
        taints = [{"key": POOL_TAINT, "value": "bench", "effect": "NoSchedule"}] \
            if dedicated else None
        async with slots:
            with contextlib.suppress(KubeError):
                await kube.create(resource_path(CORE, "nodes"), fake_node(
                    name, labels=labels, taints=taints, zone=f"zone-{(index // 2) % ZONES}",
                    capacity={"cpu": "64", "memory": "256Gi", "pods": "250"}))

    await asyncio.gather(*(one(n) for n in missing))
    return want


def node_lease_seconds(nodes: int) -> int:
    """A lease long enough that kwok renews at most 50 of them a second (it renews each at a
    quarter of its duration): 40 s up to 500 nodes, 160 s at 2,000, 400 s at 5,000. The
    default 40 s at 5,000 nodes is 500 updates a second, which this machine's API server
    cannot serve beside a benchmark (the nodes then flap NotReady; cluster.Options)."""
    return max(40, -(-nodes * 4 // 50))


async def not_ready_nodes(kube: KubeClient, names: set[str]) -> set[str]:
    """The bench nodes that are not Ready or carry a taint kwok's nodes never have (the node
    lifecycle controller's not-ready/unreachable taints)."""
    listed, _ = await kube.list_all(resource_path(CORE, "nodes"), labelSelector="type=kwok")
    healthy = {n["metadata"]["name"] for n in listed if any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (n.get("status") or {}).get("conditions") or ()) and not any(
        t.get("key", "").startswith("node.kubernetes.io/")
        for t in (n.get("spec") or {}).get("taints") or ())}
    return names - healthy


async def wait_nodes_ready(kube: KubeClient, names: set[str]) -> None:
    """Wait until kwok reports every bench node Ready and untainted, so the first run's
    scheduler does not meet NotReady nodes (and pay for unschedulable attempts the later runs
    never see). 5,000 nodes take about 90 s here (five minutes before their leases were
    lengthened); the wait allows a fifth of a second a node, at least 300 s."""
    timeout = max(300.0, 0.2 * len(names))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not await not_ready_nodes(kube, names):
            return
        await asyncio.sleep(2.0)
    print(f"  (not every node Ready after {timeout:.0f} s)", flush=True)


# ---- scheduler processes ---------------------------------------------------------------------
def gang_config(workdir: Path, name: str) -> Path:
    """berthmaster's configuration for the gang workloads: examples/coscheduling/
    scheduler-config.yaml (the default profile plus Coscheduling) with this run's
    schedulerName, no leader election and the client QPS lifted as the flags lift it."""
    path = workdir / "coscheduling.yaml"
    text = GANG_EXAMPLE.read_text().replace("schedulerName: berthmaster",
                                            f"schedulerName: {name}")
    path.write_text(f"leaderElection: {{leaderElect: false}}\n"
                    f"clientConnection: {{qps: {LIFTED_QPS}, burst: {LIFTED_BURST}}}\n{text}")
    return path


def plugin_config_text(name: str) -> str:
    """berthmaster's configuration for the plugin run: the default profile plus the trivial
    out-of-tree plugin at every point it implements (multiPoint), with schedulerName ``name``,
    no leader election and the client QPS lifted as the flags lift it."""
    return (f"apiVersion: kubescheduler.config.k8s.io/v1\n"
            f"kind: KubeSchedulerConfiguration\n"
            f"leaderElection: {{leaderElect: false}}\n"
            f"clientConnection: {{qps: {LIFTED_QPS}, burst: {LIFTED_BURST}}}\n"
            f"profiles:\n"
            f"- schedulerName: {name}\n"
            f"  plugins:\n"
            f"    multiPoint:\n"
            f"      enabled: [{{name: {TRIVIAL_PLUGIN}}}]\n")


def plugin_environment(base: dict[str, str]) -> dict[str, str]:
    """``base`` with the trivial plugin's directory first on PYTHONPATH, where
    importlib.metadata finds its entry point as it finds an installed package's."""
    paths = [str(TRIVIAL_PLUGIN_PATH), *filter(None, [base.get("PYTHONPATH", "")])]
    return {**base, "PYTHONPATH": os.pathsep.join(paths)}


def start_scheduler(kind: str, kubeconfig: str, workdir: Path, binary: Path,
                    extra: Sequence[str] = (), gang: bool = False) -> tuple[Proc, str]:
    log = workdir / f"{kind}.log"
    name = scheduler_name(kind)
    env = None
    if kind in ("stub", "berthmaster", PLUGIN_RUN):
        if kind == "stub":
            command = [sys.executable, __file__, "--run-stub", "--kubeconfig", kubeconfig,
                       "--stub-name", name, "--stub-concurrency",
                       str(berthmaster_bind_concurrency(extra))]
        else:
            # no configuration: kube-scheduler 1.35's default profile, as kube-scheduler runs
            command = [*BERTHMASTER_CLI, "scheduler", "--kubeconfig",
                       kubeconfig, "--scheduler-name", name, "--no-leader-elect",
                       "--metrics-bind-address", "", "--kube-api-qps", str(LIFTED_QPS),
                       "--kube-api-burst", str(LIFTED_BURST), *extra]
            if gang:
                command += ["--config", str(gang_config(workdir, name))]
            elif kind == PLUGIN_RUN:
                config = workdir / "plugin.yaml"
                config.write_text(plugin_config_text(name))
                command += ["--config", str(config)]
                env = plugin_environment(dict(os.environ))
        handle = log.open("wb")
        popen = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        return Proc(popen, log), name
    lifted = kind.endswith("lifted")
    config = kube_scheduler_config(kubeconfig, name, qps=LIFTED_QPS if lifted else 50,
                                   burst=LIFTED_BURST if lifted else 100)
    return start_kube_scheduler(binary, config, workdir, kind), name


def sync_seconds(log: Path) -> float | None:
    for line in log.read_text(errors="replace").splitlines():
        if '"caches synced"' in line:
            with contextlib.suppress(ValueError, KeyError):
                return float(json.loads(line)["seconds"])
    return None


# ---- one measured run ------------------------------------------------------------------------
@dataclass
class Result:
    scheduler: str
    workload: str
    pods: int
    bound: int
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_per_pod_ms: float
    rss_mib: float
    sync_s: float | None = None
    first_bind_s: float = 0.0  # process start -> the warm-up pod bound (every scheduler)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.bound / self.seconds if self.seconds else 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(kube: KubeClient, args: argparse.Namespace, kind: str, workload: str,
                  nodes: list[str], workdir: Path, pods: int = 0) -> Result:
    namespace = await create_namespace(kube, f"bench-{workload}-{kind}-{uuid.uuid4().hex[:4]}")
    pods = pods or args.pods
    count = pods if workload != "anti-affinity" else min(pods, len(nodes) // 2)
    size = GANG_SIZES.get(workload, 0)
    if size:
        # whole groups only, each a PodGroup of minMember = its size, made before its pods
        count = max(size, count // size * size)
        await create_podgroups(kube, namespace, count // size, size)
    # Pre-bound existing pods (basic only), created before the scheduler starts.
    if workload == "basic" and args.existing:
        await create_pods(kube, namespace, [
            pod_body(f"existing-{i}", "none", workload, i, node=nodes[i % len(nodes)])
            for i in range(args.existing)], rate=0)
    await wait_nodes_ready(kube, set(nodes))
    name = scheduler_name(kind)
    bodies = [pod_body(f"p-{i}", name, workload, i) for i in range(count)]
    created: dict[str, float] = {}
    bound_at: dict[str, float] = {}
    watching = asyncio.Event()
    watcher = asyncio.create_task(watch_binds(kube, namespace, bound_at, watching))
    await watching.wait()
    proc: Proc | None = None

    def launch() -> Proc:
        return start_scheduler(kind, args.kubeconfig, workdir, Path(args.kube_scheduler_binary),
                               shlex.split(args.berthmaster_args), gang=bool(size))[0]

    try:
        if args.backlog:
            # every pod waits before the scheduler starts: the run measures binding alone,
            # from the first bind to the last, with no pod creation beside it
            start = time.monotonic()
            await create_pods(kube, namespace, bodies, rate=0, created=created)
            created_s = time.monotonic() - start
            launched = time.monotonic()
            proc = launch()
            await wait_bound(bound_at, 1, launched + args.timeout, poll=0.01)
            cpu_before = proc.cpu_seconds()
            start = min(bound_at.values(), default=time.monotonic())
            first_bind = start - launched
        else:
            launched = time.monotonic()
            proc = launch()
            first_bind = await wait_ready(kube, namespace, name) - launched
            cpu_before = proc.cpu_seconds()
            start = time.monotonic()
            await create_pods(kube, namespace, bodies, rate=args.rate, created=created)
            created_s = time.monotonic() - start
        await wait_bound(bound_at, count, time.monotonic() + args.timeout, poll=0.1)
        cpu = proc.cpu_seconds() - cpu_before
        lost = len(await not_ready_nodes(kube, set(nodes)))
        latencies = [(bound_at[n] - created[n]) * 1000 for n in bound_at if n in created]
        end = max(bound_at.values()) if bound_at else time.monotonic()
        return Result(kind, workload, count, len(bound_at), end - start,
                      percentile(latencies, 0.5), percentile(latencies, 0.99),
                      cpu * 1000 / max(1, len(bound_at)), proc.peak_rss_mib(),
                      sync_seconds(proc.log) if kind.startswith("berthmaster") else None,
                      first_bind,
                      {"not_ready_after": lost, "created_s": created_s})
    finally:
        watcher.cancel()
        if proc is not None:
            proc.stop()
        await remove_namespace(kube, namespace)


async def ensure_podgroup_crd(kube: KubeClient) -> None:
    """The PodGroup CRD (deploy/crds), installed once and served before a gang run."""
    crd = safe_load(PODGROUP_CRD.read_text())
    path = resource_path(group_path("apiextensions.k8s.io", "v1"),
                         "customresourcedefinitions")
    with contextlib.suppress(KubeError):
        await kube.create(path, crd)
    name = crd["metadata"]["name"]
    for _ in range(600):
        got = await kube.get(f"{path}/{name}")
        if any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (got.get("status") or {}).get("conditions") or ()):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"CustomResourceDefinition {name} not Established after 60 s")


async def create_podgroups(kube: KubeClient, namespace: str, groups: int, size: int) -> None:
    await ensure_podgroup_crd(kube)
    path = resource_path(group_path("scheduling.x-k8s.io", "v1alpha1"), "podgroups", namespace)
    for index in range(groups):
        await kube.create(path, {"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                 "kind": "PodGroup", "metadata": {"name": f"g-{index}"},
                                 "spec": {"minMember": size}})


async def wait_bound(bound_at: dict[str, float], want: int, deadline: float,
                     poll: float) -> None:
    """Until the watch has seen ``want`` pods bound, or ``deadline`` (time.monotonic())."""
    while len(bound_at) < want and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(poll)


async def remove_namespace(kube: KubeClient, namespace: str) -> None:
    """Delete a run's pods (64 at a time, at once: grace period 0) and its namespace, and
    wait until the pods are gone. A DeleteCollection of the pods is served one pod at a time
    (kube-apiserver's --delete-collection-workers defaults to 1): ten thousand pods took over
    three minutes, and the next run started among them."""
    path = resource_path(CORE, "pods", namespace)
    with contextlib.suppress(KubeError):
        items, _ = await kube.list_all(path)
        slots = asyncio.Semaphore(64)

        async def one(name: str) -> None:
            async with slots:
                with contextlib.suppress(KubeError):
                    await kube.delete(resource_path(CORE, "pods", namespace, name),
                                      {"kind": "DeleteOptions", "gracePeriodSeconds": 0})

        await asyncio.gather(*(one(pod["metadata"]["name"]) for pod in items))
    with contextlib.suppress(KubeError):
        await kube.delete(resource_path(CORE, "namespaces", name=namespace),
                          {"kind": "DeleteOptions", "gracePeriodSeconds": 0})
    await wait_pods_gone(kube, namespace)


async def wait_pods_gone(kube: KubeClient, namespace: str, timeout: float = 600.0) -> None:
    """Wait until the namespace's pods are gone, so the next run's scheduler neither lists
    them nor spends its measured CPU on their deletion events."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            page = await kube.request("GET", resource_path(CORE, "pods", namespace),
                                      params={"limit": 1})
        except KubeError:
            return
        if not page.get("items"):
            return
        await asyncio.sleep(0.5)
    print(f"  (pods of {namespace} still there after {timeout:.0f} s)", flush=True)


async def create_namespace(kube: KubeClient, namespace: str) -> str:
    """A run's namespace, once its default service account exists (pods need it)."""
    await kube.create(resource_path(CORE, "namespaces"),
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await wait_default_account(kube, namespace)
    return namespace


async def wait_default_account(kube: KubeClient, namespace: str) -> None:
    for _ in range(300):
        try:
            await kube.get(resource_path(CORE, "serviceaccounts", namespace, "default"))
            return
        except KubeError:
            await asyncio.sleep(0.1)


async def wait_ready(kube: KubeClient, namespace: str, scheduler: str) -> float:
    """The scheduler is up and synced once it binds a warm-up pod; returns when it was seen
    bound (time.monotonic(), to 50 ms). Process start to this moment is the initial sync as
    seen from outside, the same measure for every scheduler: kube-scheduler logs its cache
    sync only at -v=3, which also logs every pod and would inflate its CPU figures."""
    body = pod_body("warmup", scheduler, "warmup", 0)
    await kube.create(resource_path(CORE, "pods", namespace), body)
    for _ in range(2400):
        pod = await kube.get(resource_path(CORE, "pods", namespace, "warmup"))
        if pod["spec"].get("nodeName"):
            return time.monotonic()
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{scheduler} did not bind a warm-up pod within 120 s")


async def create_pods(kube: KubeClient, namespace: str, bodies: list[JSON], rate: float,
                      created: dict[str, float] | None = None) -> None:
    slots = asyncio.Semaphore(64)
    path = resource_path(CORE, "pods", namespace)
    start = time.monotonic()

    async def one(index: int, body: JSON) -> None:
        if rate > 0:
            await asyncio.sleep(max(0.0, start + index / rate - time.monotonic()))
        async with slots:
            if created is not None:
                created[body["metadata"]["name"]] = time.monotonic()
            await kube.create(path, body)

    await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))


async def watch_binds(kube: KubeClient, namespace: str, bound_at: dict[str, float],
                      ready: asyncio.Event) -> None:
    path = resource_path(CORE, "pods", namespace)
    items, version = await kube.list_all(path)
    for pod in items:
        name = pod["metadata"]["name"]
        if pod["spec"].get("nodeName") and name.startswith("p-"):
            bound_at.setdefault(name, time.monotonic())
    ready.set()
    while True:
        with contextlib.suppress(KubeError):
            async for event in kube.watch(path, version):
                pod = event["object"]
                version = pod["metadata"].get("resourceVersion", version)
                name = pod["metadata"].get("name", "")
                if (pod.get("spec") or {}).get("nodeName") and name not in bound_at \
                        and name.startswith("p-"):
                    bound_at[name] = time.monotonic()


# ---- the initial sync alone (--sync) ------------------------------------------------------------
@dataclass
class SyncResult:
    scheduler: str
    first_bind_s: float
    rss_mib: float
    peak_mib: float
    cpu_s: float
    own_sync_s: float | None


async def measure_sync(kube: KubeClient, args: argparse.Namespace, nodes: list[str],
                       workdir: Path) -> list[SyncResult]:
    """--sync: ``args.sync`` bound pods created once, then each scheduler's start to first
    bind, and its memory and CPU at that moment."""
    namespace = await create_namespace(kube, f"bench-sync-{uuid.uuid4().hex[:4]}")
    started = time.monotonic()
    await create_pods(kube, namespace, [
        pod_body(f"existing-{i}", "none", "basic", i, node=nodes[i % len(nodes)])
        for i in range(args.sync)], rate=0)
    print(f"{args.sync} bound pods ready in {time.monotonic() - started:.1f} s", flush=True)
    try:
        return await _sync_rounds(kube, args, workdir)
    finally:
        await remove_namespace(kube, namespace)


async def _sync_rounds(kube: KubeClient, args: argparse.Namespace, workdir: Path
                       ) -> list[SyncResult]:
    results = []
    for kind in [k for _ in range(args.rounds) for k in args.schedulers]:
        if kind == "stub":
            continue  # places nothing, keeps nothing: no sync to compare
        probe = await create_namespace(kube, f"bench-sync-{kind}-{uuid.uuid4().hex[:4]}")
        launched = time.monotonic()
        proc, name = start_scheduler(kind, args.kubeconfig, workdir,
                                     Path(args.kube_scheduler_binary),
                                     shlex.split(args.berthmaster_args))
        try:
            first_bind = await wait_ready(kube, probe, name) - launched
            cpu = proc.cpu_seconds()
            rss = proc.rss_mib()
            results.append(SyncResult(kind, first_bind, rss, proc.peak_rss_mib(), cpu,
                                      sync_seconds(proc.log) if kind == "berthmaster"
                                      else None))
            print(f"  sync {kind:<22} first bind after {first_bind:.2f} s, {rss:.0f} MiB "
                  f"(peak {results[-1].peak_mib:.0f}), {cpu:.1f} cpu s", flush=True)
        finally:
            proc.stop()
            await remove_namespace(kube, probe)
    return results


def sync_report(results: Sequence[SyncResult]) -> str:
    lines = [f"{'scheduler':<23}{'first bind s':>13}{'cpu s':>8}{'rss MiB':>9}{'peak MiB':>10}"
             f"{'x ks':>7}"]
    ks = next((r for r in results if r.scheduler == "kube-scheduler"), None)
    for r in results:
        ratio = f"{r.first_bind_s / ks.first_bind_s:.2f}" if ks and ks.first_bind_s else "-"
        lines.append(f"{r.scheduler:<23}{r.first_bind_s:>13.2f}{r.cpu_s:>8.1f}"
                     f"{r.rss_mib:>9.0f}{r.peak_mib:>10.0f}{ratio:>7}")
        if r.own_sync_s is not None:
            lines.append(f"{'':<23}(its own log: caches synced in {r.own_sync_s:.2f} s)")
    return "\n".join(lines)


# ---- report ----------------------------------------------------------------------------------
def ceiling_verdicts(results: Sequence[Result]) -> list[str]:
    """Per workload with a stub run: whether the stub was at least as fast as every scheduler
    of the run (a ceiling), said plainly either way."""
    lines = []
    for workload in dict.fromkeys(r.workload for r in results):
        group = [r for r in results if r.workload == workload]
        stub = next((r for r in group if r.scheduler == "stub"), None)
        if stub is None:
            continue
        faster = [r for r in group if r.scheduler != "stub" and r.rate > stub.rate]
        if faster:
            beaten = ", ".join(f"{r.scheduler} {r.rate:.1f}" for r in faster)
            lines.append(f"{workload}: the stub is NOT a ceiling: it bound {stub.rate:.1f} "
                         f"pods/s, slower than {beaten}; x R_ceil means nothing here")
            created = stub.extra.get("created_s")
            if created and created >= 0.9 * stub.seconds:
                lines.append(f"  (creating the stub run's pods took {created:.1f} of its "
                             f"{stub.seconds:.1f} s: the harness's pod creation set its pace)")
        else:
            lines.append(f"{workload}: the stub is a ceiling: {stub.rate:.1f} pods/s, at least "
                         "as fast as every scheduler of the run")
    return lines


def overhead_ms_per_pod(default_rate: float, plugin_rate: float) -> float | None:
    """What the plugin adds to each pod, in ms: 1/plugin_rate - 1/default_rate (pods/s);
    None when either run bound nothing."""
    if default_rate <= 0 or plugin_rate <= 0:
        return None
    return (1 / plugin_rate - 1 / default_rate) * 1000


def plugin_overhead_lines(results: Sequence[Result]) -> list[str]:
    """Per workload with both a ``berthmaster`` and a ``berthmaster-plugin`` run: their pods/s
    side by side and the plugin API's cost per pod."""
    lines = []
    for workload in dict.fromkeys(r.workload for r in results):
        group = {r.scheduler: r for r in results if r.workload == workload}
        default, plugin = group.get("berthmaster"), group.get(PLUGIN_RUN)
        if default is None or plugin is None:
            continue
        overhead = overhead_ms_per_pod(default.rate, plugin.rate)
        cost = "-" if overhead is None else f"{overhead:+.3f} ms/pod"
        lines.append(f"{workload}: plugin API: berthmaster {default.rate:.1f} pods/s, with "
                     f"{TRIVIAL_PLUGIN} {plugin.rate:.1f} pods/s: {cost} "
                     f"(cpu {plugin.cpu_per_pod_ms - default.cpu_per_pod_ms:+.2f} ms/pod)")
    return lines


def report(results: list[Result]) -> str:
    lines = []
    header = (f"{'workload':<19}{'scheduler':<23}{'bound':>11}{'pods/s':>9}{'p50 ms':>9}"
              f"{'p99 ms':>9}{'cpu ms/pod':>11}{'rss MiB':>9}{'x R_ceil':>9}{'x ks':>7}"
              f"{'x ks-lift':>10}")
    lines.append(header)
    for workload in dict.fromkeys(r.workload for r in results):
        group = {r.scheduler: r for r in results if r.workload == workload}
        ceil = group.get("stub")
        ks = group.get("kube-scheduler")
        lifted = group.get("kube-scheduler-lifted")
        for r in group.values():
            def ratio(base: Result | None, r: Result = r) -> str:
                return f"{r.rate / base.rate:.2f}" if base and base.rate else "-"
            lines.append(
                f"{workload:<19}{r.scheduler:<23}{f'{r.bound}/{r.pods}':>11}{r.rate:>9.1f}"
                f"{r.p50_ms:>9.0f}{r.p99_ms:>9.0f}{r.cpu_per_pod_ms:>11.2f}{r.rss_mib:>9.0f}"
                f"{ratio(ceil):>9}{ratio(ks):>7}{ratio(lifted):>10}")
            sync = f"start to first bind {r.first_bind_s:.2f} s"
            if r.sync_s is not None:
                sync += f" (its own log: caches synced in {r.sync_s:.2f} s)"
            lines.append(f"{'':<19}  {r.scheduler} {sync}")
    return "\n".join(lines)


async def bench(args: argparse.Namespace) -> list[Result]:
    kube = await KubeClient.from_kubeconfig(args.kubeconfig, pool_size=96)
    try:
        started = time.monotonic()
        nodes = await create_nodes(kube, args.nodes)
        await wait_nodes_ready(kube, set(nodes))
        print(f"{len(nodes)} kwok nodes ready in {time.monotonic() - started:.1f} s", flush=True)
        results: list[Result] = []
        with tempfile.TemporaryDirectory(prefix="bench-sched-") as tmp:
            if args.sync:
                args.sync_results = await measure_sync(kube, args, nodes, Path(tmp))
                return results
            if args.warm_up:
                # A fresh API server is slower than it will be for the rest of the run (its
                # caches and heap grow to the cluster's size), and the first measured run would
                # pay for it: the stub places a batch first, unreported.
                warm = await measure(kube, args, "stub", "basic", nodes, Path(tmp),
                                     pods=args.warm_up)
                print(f"  warm-up: the stub placed {warm.bound}/{warm.pods} pods at "
                      f"{warm.rate:.1f} pods/s (not reported)", flush=True)
            for workload in args.workloads:
                for kind in args.schedulers:
                    if workload in GANG_SIZES and kind.startswith("kube-scheduler"):
                        print(f"  {workload:<19} {kind:<22} skipped: kube-scheduler has no "
                              "gang plugin", flush=True)
                        continue
                    if workload in GANG_SIZES and kind == PLUGIN_RUN:
                        print(f"  {workload:<19} {kind:<22} skipped: the gang workloads run "
                              "Coscheduling's configuration", flush=True)
                        continue
                    result = await measure(kube, args, kind, workload, nodes, Path(tmp))
                    print(f"  {workload:<19} {kind:<22} {result.bound}/{result.pods} bound, "
                          f"{result.rate:.1f} pods/s, p99 {result.p99_ms:.0f} ms, "
                          f"{result.cpu_per_pod_ms:.2f} cpu ms/pod, {result.rss_mib:.0f} MiB, "
                          f"{result.extra['not_ready_after']} nodes not Ready after, "
                          f"all created in {result.extra['created_s']:.1f} s",
                          flush=True)
                    results.append(result)
        return results
    finally:
        await kube.close()


def with_plugin_run(schedulers: list[str], plugin_overhead: bool) -> list[str]:
    """The schedulers to run: with ``--plugin-overhead``, ``berthmaster`` and the plugin run
    right after it (both added when missing), so the two compare on the same API server state."""
    if not plugin_overhead:
        return schedulers
    ordered = [s for s in schedulers if s != PLUGIN_RUN]
    if "berthmaster" not in ordered:
        ordered.append("berthmaster")
    at = ordered.index("berthmaster") + 1
    return [*ordered[:at], PLUGIN_RUN, *ordered[at:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="use this cluster (default: start a local one)")
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--existing", type=int, default=200)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--full", action="store_true",
                        help="the issue's size: 5,000 nodes, 1,000 existing + 10,000 pods")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS),
                        help=f"from {', '.join(KNOWN_SCHEDULERS)}")
    parser.add_argument("--plugin-overhead", action="store_true",
                        help=f"also run {PLUGIN_RUN}: berthmaster's default profile plus "
                             f"{TRIVIAL_PLUGIN} (bench/trivial_plugin), loaded through its "
                             "berthmaster.plugins entry point, and report what the plugin API "
                             "costs per pod (docs/plugins.md)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="create pods at this many per second (0: as fast as possible)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="give up waiting for binds after this many seconds per run")
    parser.add_argument("--kube-scheduler-binary", default=None)
    parser.add_argument("--berthmaster-args", default="",
                        help="extra flags for berthmaster's scheduler, e.g. "
                             "'--bind-concurrency 64'")
    parser.add_argument("--sync", type=int, default=0, metavar="N",
                        help="measure the initial sync alone with N bound pods (see above)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --sync: start every scheduler this many times, in turn")
    parser.add_argument("--backlog", action="store_true",
                        help="create each run's pods before its scheduler starts, and measure "
                             "from its first bind to its last (binding alone, no creation)")
    parser.add_argument("--warm-up", type=int, default=-1, metavar="N",
                        help="pods the stub places before the first measured run, unreported "
                             "(default: a fifth of --pods, at most 2,000; 0: none)")
    parser.add_argument("--node-lease-seconds", type=int, default=0,
                        help="the kwok nodes' lease (default: 40 s, longer above 500 nodes so "
                             "that leases renew at most 50 times a second)")
    parser.add_argument("--run-stub", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stub-name", default="bench-stub", help=argparse.SUPPRESS)
    parser.add_argument("--stub-concurrency", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_stub:
        asyncio.run(run_stub(args.kubeconfig, args.stub_name,
                             args.stub_concurrency or berthmaster_bind_concurrency()))
        return 0
    if args.full:
        args.nodes, args.existing, args.pods = 5000, 1000, 10000
    if args.warm_up < 0:
        args.warm_up = min(2000, args.pods // 5)
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.schedulers = with_plugin_run([s for s in args.schedulers.split(",") if s],
                                      args.plugin_overhead)
    unknown = sorted(set(args.workloads) - set(WORKLOADS)) + \
        sorted(set(args.schedulers) - set(KNOWN_SCHEDULERS))
    if unknown:
        parser.error(f"unknown workload/scheduler {unknown}; choose from {WORKLOADS} and "
                     f"{KNOWN_SCHEDULERS}")
    from berthmaster.tooling.devcluster import build
    args.kube_scheduler_binary = args.kube_scheduler_binary or str(
        build.binary_path("kube-scheduler"))
    # SIGTERM (timeout, pkill) unwinds like Ctrl-C, so the finally blocks stop the scheduler
    # processes and the control plane instead of leaving them running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plane = None
    if not args.kubeconfig:
        from berthmaster.tooling.devcluster.cluster import ControlPlane, Options
        plane = ControlPlane(f"bench-{os.getpid()}", options=Options(
            node_lease_seconds=args.node_lease_seconds or node_lease_seconds(args.nodes)))
        args.kubeconfig = str(plane.up().kubeconfig)
    try:
        results = asyncio.run(bench(args))
    finally:
        if plane is not None:
            plane.down(quiet=True)
    print()
    if args.sync:
        print(f"nodes={args.nodes} bound pods={args.sync}: start to first bind")
        print(sync_report(args.sync_results))
        return 0
    print(f"nodes={args.nodes} existing={args.existing} pods={args.pods} "
          f"rate={'max' if not args.rate else args.rate}")
    print(report(results))
    for line in [*ceiling_verdicts(results), *plugin_overhead_lines(results)]:
        print(line)
    summary = {r.workload + "/" + r.scheduler: round(r.rate, 1) for r in results}
    print(json.dumps(summary))
    return 0 if all(r.bound == r.pods for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
