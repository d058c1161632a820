"""The components, run with exactly the chart's arguments and exactly its RBAC, do their work.

``kubectl auth can-i`` proves each rule is there; this proves the rules are *enough*. The
scheduler and the operator run here as processes, with the container arguments the chart
renders and a kubeconfig holding a token of the chart's ServiceAccount (TokenRequest API), so
every request they make is authorized as it would be in the cluster. The scheduler must bind a
pod, hold its Lease and record events; the operator must take a Machine through its preDrain
hook to deletion and turn a Descheduler into its Job (in its own namespace, run as the chart's
descheduler account). Neither may log a 403. Both serve their metrics port as the chart sets it
(kube-scheduler's secure port): their TokenReviews and SubjectAccessReviews go through the
chart's system:auth-delegator binding, and a ServiceAccount bound to the chart's metrics-reader
ClusterRole scrapes /metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import find, one, render
from tests.integration.chart.conftest import INSTALLED_VALUES
from tests.integration.conftest import NodeFactory
from tests.support.accounts import service_account_kubeconfig
from tests.support.waiting import http_get, wait_for

LEASES = group_path("coordination.k8s.io", "v1")
MACHINES = group_path("machine.openshift.io", "v1beta1")
BERTHMASTER = group_path("berthmaster.io", "v1alpha1")
BATCH = group_path("batch", "v1")
RBAC = group_path("rbac.authorization.k8s.io", "v1")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def chart_container(installed: dict[str, str], component: str) -> dict[str, Any]:
    objects = render(INSTALLED_VALUES, release=installed["release"],
                     namespace=installed["namespace"])
    deployment = one(objects, "Deployment", f"-{component}")
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    container["_objects"] = objects
    return container


@contextlib.asynccontextmanager
async def running(args: Sequence[str], log: Path, env: dict[str, str] | None = None
                  ) -> AsyncIterator[asyncio.subprocess.Process]:
    import os

    binary = Path(sys.executable).parent / "berthmaster"
    with log.open("w") as out:
        process = await asyncio.create_subprocess_exec(
            str(binary), *args, stdout=out, stderr=asyncio.subprocess.STDOUT,
            cwd=log.parent, env={**os.environ, **(env or {})})
        try:
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 20)
                except TimeoutError:
                    process.kill()
                    await process.wait()


def on_local_ports(args: Sequence[str], port: int) -> list[str]:
    """The chart's arguments with the secure port moved to a free loopback one."""
    moved = {"--secure-port": f"--secure-port={port}", "--bind-address": "--bind-address=127.0.0.1"}
    return [moved.get(arg.split("=", 1)[0], arg) for arg in args]


async def https_get(url: str, token: str | None = None) -> tuple[int, str]:
    """GET over HTTPS without checking the (self-signed) certificate, as the ServiceMonitor's
    default insecureSkipVerify; (0, "") while nothing answers."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with aiohttp.ClientSession() as session, session.get(
                url, headers=headers, ssl=False) as answer:
            return answer.status, await answer.text()
    except aiohttp.ClientConnectionError:
        return 0, ""


async def scraped_by_a_metrics_reader(kube: KubeClient, installed: dict[str, str],
                                      namespace: str, base: str) -> str:
    """Probes answer anyone, /metrics refuses the anonymous and serves a ServiceAccount bound
    to the chart's <prefix>-metrics-reader; the body of that scrape."""
    assert (await https_get(f"{base}/healthz"))[0] == 200
    assert (await https_get(f"{base}/metrics"))[0] == 403  # the SubjectAccessReview was made
    reader = f"reader-{uuid.uuid4().hex[:6]}"
    await kube.create(resource_path(CORE, "serviceaccounts", namespace),
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": reader}})
    token = (await kube.create(resource_path(CORE, "serviceaccounts", namespace, reader, "token"),
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 3600}}))["status"]["token"]
    binding = f"{namespace}-{reader}"
    await kube.create(resource_path(RBAC, "clusterrolebindings"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": f"{installed['prefix']}-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": reader, "namespace": namespace}]})
    try:
        async def scrape() -> str | None:
            status, body = await https_get(f"{base}/metrics", token)
            return body if status == 200 else None

        return str(await wait_for(scrape, timeout=60, what="/metrics as the metrics reader"))
    finally:
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(RBAC, "clusterrolebindings", name=binding))


def refusals(log: Path) -> list[str]:
    """Log lines reporting an authorization refusal: RBAC's 403 reads ``... is forbidden: User
    "<name>" cannot <verb> resource ...``. A bare "403" would also match timestamps and port
    numbers, and "forbidden" alone also matches the NamespaceLifecycle admission's 403 for an
    event posted into a namespace being deleted ("unable to create new content in namespace X
    because it is being terminated"), which is no RBAC gap."""
    return [line for line in log.read_text().splitlines()
            if "forbidden" in line.lower() and " cannot " in line]


async def test_scheduler_binds_with_only_the_chart_rbac(
    kube: KubeClient, cluster: RunningCluster, installed: dict[str, str], namespace: str,
    nodes: NodeFactory, tmp_path: Path
) -> None:
    node = await nodes.create(zone="zone-a", labels={"region": "primary", "zone": "zone-a"})
    container = chart_container(installed, "scheduler")
    # The chart's default passes no --policy (the built-in default profile); a release with
    # scheduler.policy set mounts its ConfigMap, which this copies.
    for config_map in find(container["_objects"], "ConfigMap", "-scheduler-policy"):
        (tmp_path / "policy.json").write_text(config_map["data"]["policy.json"])
    port = free_port()
    kubeconfig = await service_account_kubeconfig(
        kube, cluster, installed["namespace"], f"{installed['prefix']}-scheduler", tmp_path)
    args = []
    for arg in container["args"]:
        if arg.startswith("--policy="):
            arg = f"--policy={tmp_path / 'policy.json'}"
        args.append(arg.replace("$(POD_NAME)", "local-scheduler"))
    args = on_local_ports(args, port)
    log = tmp_path / "scheduler.log"
    async with running([*args, f"--kubeconfig={kubeconfig}"], log) as process:
        await kube.create(resource_path(CORE, "pods", namespace), {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "placed"},
            "spec": {"schedulerName": "zonal",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})

        async def bound() -> str | None:
            assert process.returncode is None, log.read_text()[-3000:]
            pod = await kube.get(resource_path(CORE, "pods", namespace, "placed"))
            return pod["spec"].get("nodeName") or None

        assert await wait_for(bound, timeout=90, what="pod placed bound") == (
            node["metadata"]["name"])
        lease = await kube.get(resource_path(LEASES, "leases", installed["namespace"], "zonal"))
        assert lease["spec"]["holderIdentity"] == "local-scheduler"

        async def scheduled_event() -> list[dict[str, Any]]:
            listed = await kube.get(resource_path(CORE, "events", namespace),
                                    fieldSelector="involvedObject.name=placed")
            return [e for e in listed["items"] if e["reason"] == "Scheduled"]

        (event,) = await wait_for(scheduled_event, timeout=30, what="the Scheduled event")
        assert event["source"]["component"] == "zonal"
        body = await scraped_by_a_metrics_reader(kube, installed, namespace,
                                                 f"https://127.0.0.1:{port}")
        assert "scheduler_schedule_attempts_total" in body
    assert refusals(log) == [], "\n".join(refusals(log))


def condition(machine: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (machine.get("status") or {}).get("conditions") or []:
        if item["type"] == kind:
            return dict(item)
    return None


async def gone(kube: KubeClient, path: str) -> bool:
    try:
        await kube.get(path)
    except KubeError as error:
        return error.not_found
    return False


async def test_operator_runs_machines_and_deschedulers_with_only_the_chart_rbac(
    kube: KubeClient, cluster: RunningCluster, installed: dict[str, str], namespace: str,
    tmp_path: Path
) -> None:
    container = chart_container(installed, "operator")
    port = free_port()
    kubeconfig = await service_account_kubeconfig(
        kube, cluster, installed["namespace"], f"{installed['prefix']}-operator", tmp_path)
    metrics_port = free_port()
    args = on_local_ports([f"--liveness=http://127.0.0.1:{port}/healthz"
                           if arg.startswith("--liveness=") else arg
                           for arg in container["args"]], metrics_port)
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    env["POD_NAMESPACE"] = installed["namespace"]
    # KUBECONFIG rather than --kubeconfig: kopf logs in through kubernetes_asyncio, which reads
    # $KUBECONFIG when first imported (in the cluster, kopf logs in with the pod's token).
    env["KUBECONFIG"] = str(kubeconfig)
    log = tmp_path / "operator.log"
    machine_name = f"m-{uuid.uuid4().hex[:6]}"
    machine_path = resource_path(MACHINES, "machines", namespace, machine_name)
    descheduler_name = f"d-{uuid.uuid4().hex[:6]}"
    descheduler_path = resource_path(BERTHMASTER, "deschedulers", None, descheduler_name)
    async with running(args, log, env) as process:

        async def live() -> bool:
            assert process.returncode is None, log.read_text()[-3000:]
            return (await http_get(f"http://127.0.0.1:{port}/healthz"))[0] == 200

        await wait_for(live, timeout=60, what="kopf liveness endpoint")
        async def serving() -> bool:
            return (await https_get(f"https://127.0.0.1:{metrics_port}/healthz"))[0] == 200

        await wait_for(serving, timeout=60, what="the operator's secure endpoint")
        body = await scraped_by_a_metrics_reader(kube, installed, namespace,
                                                 f"https://127.0.0.1:{metrics_port}")
        assert "process_cpu_seconds_total" in body

        # A Machine through its preDrain hook (OpenShift's lifecycle hook example).
        await kube.create(resource_path(MACHINES, "machines", namespace), {
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": machine_name},
            "spec": {"lifecycleHooks": {"preDrain": [
                         {"name": "MigrateImportantApp",
                          "owner": "my-app-migration-controller"}]},
                     "providerSpec": {"value": {"apiVersion": "berthmaster.io/v1alpha1",
                                                "kind": "KwokMachineProviderSpec"}}}})

        async def node_ref() -> str | None:
            machine = await kube.get(machine_path)
            return ((machine.get("status") or {}).get("nodeRef") or {}).get("name")

        node = await wait_for(node_ref, timeout=90, what=f"Machine {machine_name} nodeRef")
        await kube.delete(machine_path)

        async def held_by_hook() -> dict[str, Any] | None:
            drainable = condition(await kube.get(machine_path), "Drainable")
            return drainable if drainable and drainable["status"] == "False" else None

        drainable = await wait_for(held_by_hook, timeout=60, what="Drainable False")
        assert drainable["reason"] == "HookPresent"
        await kube.patch(machine_path, [{"op": "remove", "path": "/spec/lifecycleHooks/preDrain"}],
                         kind="json")
        await wait_for(lambda: gone(kube, machine_path), timeout=90, what="Machine deleted")
        assert await gone(kube, resource_path(CORE, "nodes", None, node))

        # A Descheduler with the documentation's sample policy becomes its objects and a Job.
        sample = Path(__file__).parent / "seed_samples" / "descheduler-seed-policy.yaml"
        descheduler = yaml.safe_load(sample.read_text())
        descheduler["metadata"]["name"] = descheduler_name
        await kube.create(resource_path(BERTHMASTER, "deschedulers"), descheduler)

        async def job() -> list[dict[str, Any]]:
            listed = await kube.get(resource_path(BATCH, "jobs", installed["namespace"]),
                                    labelSelector=f"berthmaster.io/descheduler={descheduler_name}")
            return list(listed["items"])

        # In the operator's namespace, as the chart's descheduler account (no RBAC written).
        (created,) = await wait_for(job, timeout=60, what="the descheduler Job")
        pod_spec = created["spec"]["template"]["spec"]
        assert pod_spec["containers"][0]["image"] == env["BERTHMASTER_IMAGE"]
        assert pod_spec["serviceAccountName"] == f"{installed['prefix']}-descheduler"
        role = await kube.get(resource_path(RBAC, "clusterroles", None,
                                            f"{installed['prefix']}-descheduler"))
        assert {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]} in (
            role["rules"])
        await kube.delete(descheduler_path)
        await wait_for(lambda: gone(kube, descheduler_path), timeout=60,
                       what="Descheduler deleted")
    assert refusals(log) == [], "\n".join(refusals(log))
