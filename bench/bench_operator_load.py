"""Benchmark: the operator's load on the API server at rest — requests and bytes per minute.

One local control plane (or ``--kubeconfig``), N kwok nodes and M running pods (bound directly,
kwok runs them), the operator's CRDs, a ClusterAutoscaler ``default`` (so the autoscaler loop
runs every 10 s, upstream's scan interval) and a two-replica kwok MachineSet (so the Machine and
Node handlers have objects). Then ``berthmaster operator`` runs with every capability, once per
source tree being compared (``--compare REV`` adds a run of that git revision's code, in the
same cluster, before the working tree's); after a warm-up (the first autoscaler loop has
written its status, then ``--warmup`` seconds more) its traffic is counted for ``--window``
seconds, with nothing else changing in the cluster but kwok's heartbeats.

How it is counted: inside the operator process (the bench starts it through this file with
``--probe``), at aiohttp's client layer, which every request of the operator goes through —
kopf's watches and patches, and berthmaster's own client alike:
- requests: each ``ClientSession._request``, classed as WATCH, LIST or GET (a GET on a
  collection or one object), POST, PATCH, PUT, DELETE, with the resource's plural;
- bytes received: every byte the HTTP protocol handler receives from the sockets (after TLS,
  before HTTP parsing: status lines, headers and bodies, compressed when the server compressed).
The API server's own ``apiserver_request_total`` is not used: it has no label telling clients
apart, and kwok and the controller-manager talk to the same server.

    .venv/bin/python bench/bench_operator_load.py                       # 100 nodes / 1,000 pods
    .venv/bin/python bench/bench_operator_load.py --compare main        # before/after, one run
    .venv/bin/python bench/bench_operator_load.py --full --compare main # 1,000 / 10,000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "deploy" / "crds"
NAMESPACE = "bench-operator"
JSON = dict[str, Any]


# ---- the probe: runs inside the operator process ---------------------------------------------
def classify(method: str, url: str, params: Any) -> str:
    """``VERB resource`` for one request URL (``/api/v1/namespaces/ns/pods?watch=true``)."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if isinstance(params, dict):
        query.update({str(k): str(v) for k, v in params.items()})
    segments = [s for s in parts.path.split("/") if s]
    rest = segments[2:] if segments[:1] == ["api"] else segments[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] if rest else (segments[-1] if segments else "/")
    verb = method.upper()
    if verb == "GET":
        if str(query.get("watch", "")).lower() in ("true", "1"):
            verb = "WATCH"
        elif len(rest) == 1:
            verb = "LIST"
    if len(rest) >= 3:
        resource += "/" + rest[2]  # a subresource: status, eviction, binding, ...
    return f"{verb} {resource}"


def resident_bytes() -> int:
    """This process's resident memory (VmRSS), 0 where /proc is missing."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def run_probe(out: Path, argv: list[str]) -> int:
    """Count the operator's HTTP traffic into ``out`` (JSON, rewritten every second), then run
    ``berthmaster <argv>`` in this process."""
    import aiohttp
    from aiohttp import client_proto

    counts: Counter[str] = Counter()
    received = [0]
    lock = threading.Lock()
    original_request = aiohttp.ClientSession._request
    original_received = client_proto.ResponseHandler.data_received

    async def counted_request(self: aiohttp.ClientSession, method: str, url: Any,
                              **kwargs: Any) -> Any:
        with lock:
            counts[classify(method, str(url), kwargs.get("params"))] += 1
        return await original_request(self, method, url, **kwargs)

    def counted_received(self: Any, data: bytes) -> None:
        received[0] += len(data)
        original_received(self, data)

    aiohttp.ClientSession._request = counted_request  # type: ignore[method-assign]
    client_proto.ResponseHandler.data_received = counted_received  # type: ignore[method-assign]

    def dump() -> None:
        while True:
            with lock:
                figures = {"requests": dict(counts), "bytes": received[0], "time": time.time(),
                           "cpu": time.process_time(), "rss": resident_bytes()}
            partial = out.with_suffix(".tmp")
            partial.write_text(json.dumps(figures))
            partial.replace(out)
            time.sleep(1.0)

    threading.Thread(target=dump, daemon=True).start()
    from berthmaster.cli import main as cli_main

    return int(cli_main(argv) or 0)


# ---- the cluster -------------------------------------------------------------------------------
async def populate(kubeconfig: str, nodes: int, pods: int) -> None:
    from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
    from berthmaster.tooling.devcluster.nodes import fake_node

    async with await KubeClient.from_kubeconfig(kubeconfig) as kube:
        slots = asyncio.Semaphore(48)
        names = [f"load-node-{i:05d}" for i in range(nodes)]

        async def create(path: str, body: JSON) -> None:
            async with slots:
                with contextlib.suppress(KubeError):  # exists already (a reused cluster)
                    await kube.create(path, body)

        have, _ = await kube.list_all(resource_path(CORE, "nodes"), resourceVersion="0")
        existing = {n["metadata"]["name"] for n in have}  # a reused cluster keeps its objects
        await asyncio.gather(*(create(resource_path(CORE, "nodes"), fake_node(
            name, zone=f"zone-{i % 3}", capacity={"cpu": "32", "memory": "128Gi",
                                                  "pods": "110"}))
            for i, name in enumerate(names) if name not in existing))
        with contextlib.suppress(KubeError):
            await kube.create(resource_path(CORE, "namespaces"),
                              {"metadata": {"name": NAMESPACE}})
        for _ in range(300):  # pods need the namespace's default service account
            try:
                await kube.get(resource_path(CORE, "serviceaccounts", NAMESPACE, "default"))
                break
            except KubeError:
                await asyncio.sleep(0.1)
        path = resource_path(CORE, "pods", NAMESPACE)
        have, _ = await kube.list_all(path, resourceVersion="0")
        existing = {p["metadata"]["name"] for p in have}
        await asyncio.gather(*(create(path, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"load-{i:05d}", "labels": {"app": f"app-{i // 10}"}},
            "spec": {"nodeName": names[i % nodes], "containers": [{
                "name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}})
            for i in range(pods) if f"load-{i:05d}" not in existing))
        running = 0
        for _ in range(600):
            try:  # from the watch cache; a loaded API server may cut a long answer short
                listed, _ = await kube.list_all(path, fieldSelector="status.phase=Running",
                                                resourceVersion="0")
            except KubeError:
                await asyncio.sleep(2)
                continue
            running = len(listed)
            if running >= pods:
                break
            await asyncio.sleep(2)
        print(f"{nodes} nodes, {running}/{pods} pods Running", flush=True)


def kubectl(kubeconfig: str, *args: str, input: str | None = None) -> str:
    from berthmaster.tooling.devcluster import build

    result = subprocess.run([str(build.binary_path("kubectl")), "--kubeconfig", kubeconfig,
                             *args], input=input, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def install_resources(kubeconfig: str) -> None:
    kubectl(kubeconfig, "apply", "--server-side", "-f", str(CRDS))
    kubectl(kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    labels = {"machine.openshift.io/cluster-api-machineset": "load-workers"}
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
         "metadata": {"name": "default"}, "spec": {"scaleDown": {"enabled": True}}},
        {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
         "metadata": {"name": "load-workers", "namespace": NAMESPACE},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "providerSpec": {"value": {
                          "apiVersion": "berthmaster.io/v1alpha1",
                          "kind": "KwokMachineProviderSpec",
                          "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}}}}},
    ]
    kubectl(kubeconfig, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                            "items": objects}))


# ---- one measured run --------------------------------------------------------------------------
def source_tree(rev: str, into: Path) -> Path:
    """The package tree of git revision ``rev`` laid out as installed (setup.py's mapping:
    berthmaster/, scheduler/ -> berthmaster/scheduler, operator/ -> berthmaster/operator)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev,
                              "berthmaster", "scheduler", "operator"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        for member in tar.getmembers():
            top, _, rest = member.name.partition("/")
            member.name = "berthmaster/" + (rest if top == "berthmaster" else member.name)
            tar.extract(member, into, filter="data")
    return into


def read_counts(path: Path) -> JSON:
    for _ in range(100):
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(path.read_text()))
        time.sleep(0.1)
    raise RuntimeError(f"the probe wrote no figures to {path}")


def first_loop_done(kubeconfig: str) -> bool:
    out = kubectl(kubeconfig, "get", "clusterautoscaler", "default", "-o",
                  "jsonpath={.status.nodeGroups}{.status.conditions[*].type}")
    return "ScaleUp" in out


def measure(label: str, kubeconfig: str, workdir: Path, pythonpath: str | None,
            warmup: float, window: float) -> JSON:
    from berthmaster.tooling.processes import terminate

    counts = workdir / f"{label}.json"
    log = workdir / f"{label}.log"
    env = {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONSAFEPATH": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    # The previous run's status must not count as this run's first loop.
    kubectl(kubeconfig, "patch", "clusterautoscaler", "default", "--subresource=status",
            "--type=merge", "-p", '{"status": null}')
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--probe", str(counts), "--",
             "operator", "--kubeconfig", kubeconfig, "--standalone", "--liveness", ""],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(workdir))
    try:
        while not first_loop_done(kubeconfig):
            if process.poll() is not None or time.monotonic() - started > 600:
                raise RuntimeError(f"{label}: the operator made no autoscaler loop; see {log}")
            time.sleep(1)
        first_loop = time.monotonic() - started
        time.sleep(warmup)
        before = read_counts(counts)
        time.sleep(window)
        after = read_counts(counts)
    finally:
        terminate(process, 30)
    minutes = (after["time"] - before["time"]) / 60
    requests = Counter(after["requests"])
    requests.subtract(before["requests"])
    return {"label": label, "first_loop_s": first_loop, "minutes": minutes,
            "requests": {k: v / minutes for k, v in requests.items() if v},
            "bytes": (after["bytes"] - before["bytes"]) / minutes,
            "cpu": (after["cpu"] - before["cpu"]) / minutes, "rss": after.get("rss", 0)}


def report(results: list[JSON]) -> str:
    kinds = sorted({k for r in results for k in r["requests"]},
                   key=lambda k: -max(r["requests"].get(k, 0) for r in results))
    width = max(12, *(len(r["label"]) for r in results))
    head = f"{'per minute, at rest':34s}" + "".join(f"{r['label']:>{width}s}" for r in results)
    lines = [head, "-" * len(head)]
    lines.append(f"{'requests (all)':34s}" + "".join(
        f"{sum(r['requests'].values()):{width}.1f}" for r in results))
    for kind in kinds:
        lines.append(f"  {kind:32s}" + "".join(
            f"{r['requests'].get(kind, 0):{width}.1f}" for r in results))
    lines.append(f"{'bytes received (MiB)':34s}" + "".join(
        f"{r['bytes'] / 2**20:{width}.2f}" for r in results))
    lines.append(f"{'operator CPU (s)':34s}" + "".join(
        f"{r['cpu']:{width}.2f}" for r in results))
    lines.append(f"{'operator RSS at the end (MiB)':34s}" + "".join(
        f"{r['rss'] / 2**20:{width}.0f}" for r in results))
    lines.append(f"{'window (min) / first loop after (s)':34s}" + "".join(
        f"{r['minutes']:{width - 7}.2f} /{r['first_loop_s']:5.0f}" for r in results))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--probe"]:
        return run_probe(Path(argv[1]), argv[3:] if argv[2:3] == ["--"] else argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--full", action="store_true", help="the issue's size: 1,000 nodes, "
                                                            "10,000 pods")
    parser.add_argument("--compare", metavar="REV", default=None,
                        help="also measure git revision REV's operator (first), e.g. main")
    parser.add_argument("--warmup", type=float, default=30.0,
                        help="seconds after the first autoscaler loop before counting")
    parser.add_argument("--window", type=float, default=120.0, help="seconds counted")
    parser.add_argument("--kubeconfig", default=None, help="an existing cluster (default: a "
                                                           "fresh local control plane)")
    args = parser.parse_args(argv)
    if args.full:
        args.nodes, args.pods = 1000, 10_000
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    plane = None
    if not args.kubeconfig:
        from berthmaster.tooling.devcluster.cluster import ControlPlane

        plane = ControlPlane(f"bench-operator-{os.getpid()}")
        args.kubeconfig = str(plane.up().kubeconfig)
    results = []
    try:
        install_resources(args.kubeconfig)
        asyncio.run(populate(args.kubeconfig, args.nodes, args.pods))
        print(f"cluster ready in {time.monotonic() - began:.0f} s", flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-operator-") as tmp:
            runs: list[tuple[str, str | None]] = []
            if args.compare:
                tree = source_tree(args.compare, Path(tmp) / "tree")
                runs.append((args.compare, str(tree)))
            runs.append(("this tree", None))
            for label, pythonpath in runs:
                result = measure(label, args.kubeconfig, Path(tmp), pythonpath, args.warmup,
                                 args.window)
                print(f"{label}: measured", flush=True)
                results.append(result)
    finally:
        if plane is not None:
            plane.down(quiet=True)
    print()
    print(f"operator at rest: {args.nodes} kwok nodes, {args.pods} running pods, "
          f"ClusterAutoscaler default (10 s loop), one 2-replica MachineSet; "
          f"wall time {time.monotonic() - began:.0f} s")
    print(report(results))
    print(json.dumps({r["label"]: {"requests_per_min": round(sum(r["requests"].values()), 1),
                                   "MiB_per_min": round(r["bytes"] / 2**20, 3)}
                      for r in results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
