"""The chart's alerts, evaluated by a real Prometheus beside a real kube-scheduler.

Prometheus (built from the pinned module in hack/prometheus, github.com/prometheus/prometheus
cmd/prometheus) scrapes, every second: kube-scheduler v1.35.4 running against the session's API
server (its secure port, authenticated with the control plane's admin client certificate, as
job ``kube-scheduler`` in ``kube-system``), and berthmaster's scheduler and operator as
processes (as the jobs the chart's ServiceMonitors produce: the metrics Services' names, in
the release's namespace), and the API server itself (job ``apiserver``, the chart's
``prometheusRule.apiServerJob``). Its rules are the chart's PrometheusRule, rendered by helm
with the chart's own values shortening each ``for:``, window and threshold
(``prometheusRule.*For``, ``pendingPodsWindow``, ``pendingPodsThreshold``, ``drainStuckSeconds``,
``deschedulerRunFailedWindow``); nothing in the rules is rewritten.

kube-scheduler exports the same family names as berthmaster's scheduler
(``scheduler_pending_pods``, ``leader_election_master_status``; kube-scheduler
pkg/scheduler/metrics/metrics.go, component-base metrics/prometheus/clientgo/leaderelection):
the first test makes kube-scheduler's pending pods rise past the threshold, shows that the
PendingPodsRising expression without its job/namespace scope would then match, and lets the
rules run before asserting that no alert is pending or firing (the operator runs without a
ClusterAutoscaler meanwhile: its safe-to-autoscale gauge reads 0 until a first loop). The
others produce each alert's condition for real and wait for it to fire: pods piling up
unschedulable, four of four nodes NotReady under a ClusterAutoscaler, a drain a
PodDisruptionBudget holds, a Machine whose instance vanished (Failed), a Machine a preDrain
hook holds Deleting, a MachineHealthCheck short-circuited by NotReady Nodes, a Descheduler
whose Job failed, calls to a webhook named as the chart's failing, another holder keeping the
scheduler's Lease, the scheduler stopped, and, last (the operator is not started again), the
operator stopped. promtool's rule unit tests (cmd/promtool/unittest.go) then check the
operator's alerts, the webhook's and the Machine alerts (after machine-api-operator
install/0000_90_machine-api-operator_04_alertrules.yaml) with the chart's default thresholds
and ``for:`` (minutes to hours, too long to wait for), against same-named series of other
jobs.

Prometheus' API: web/api/v1/api.go (alerts, rules with lastEvaluation, query).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.operator.deschedulers.build import OWNER_LABEL
from berthmaster.operator.deschedulers.runs import DEFAULT_SERVICE_ACCOUNT
from berthmaster.operator.machines import api as machine_api
from berthmaster.operator.machines.healthcheck import mhc_path
from berthmaster.tooling.devcluster import build
from berthmaster.tooling.devcluster.cluster import RunningCluster
from berthmaster.tooling.devcluster.ports import free_port
from tests.integration.chart.chartkit import one, render
from tests.integration.conftest import NodeFactory
from tests.integration.observability.test_dashboard_and_alerts import crds, process, ready
from tests.integration.operator.machines.conftest import (
    get_machine,
    kwok_machine,
    running_machine,
    set_hooks,
)
from tests.integration.operator.machines.test_drain import (
    gone,
    machine_with_web_pods,
    pdb,
    pdb_settled,
)
from tests.integration.operator.machines.test_healthchecks import (
    check_status,
    health_check,
    node_of,
    workers,
)
from tests.integration.operator.machines.test_machinesets import settle
from tests.integration.scheduler.schedkit import create_pod, make_pod
from tests.support import grafana_model
from tests.support.chaos import NODE_NOT_READY, label, make_node_not_ready
from tests.support.processes import child
from tests.support.prometheus import (
    PrometheusAPI,
    configuration,
    rules_file,
    running,
    scrape_config,
)
from tests.support.promql import selectors
from tests.support.waiting import http_get, wait_for

__all__ = ["crds"]  # the fixture, shared with test_dashboard_and_alerts.py
# The first test's set-up builds Prometheus when the cache has none (hack/test.sh builds it
# before the tests; a cold build takes minutes).
pytestmark = pytest.mark.timeout(1200)

RELEASE_NAMESPACE = "berthmaster"
THRESHOLD = 3
# The chart's values for the test: each `for:` short enough for a test, the rest as shipped.
RULE_VALUES = ["prometheusRule.enabled=true", "dashboards.enabled=true",
               "prometheusRule.schedulerNotLeadingFor=2s",
               "prometheusRule.pendingPodsWindow=5s",
               "prometheusRule.autoscalerUnsafeFor=2s",
               "prometheusRule.drainStuckSeconds=1", "prometheusRule.drainStuckFor=1s",
               f"prometheusRule.pendingPodsThreshold={THRESHOLD}",
               "admission.enabled=true", "prometheusRule.admissionWebhookFailingWindow=5s",
               "prometheusRule.admissionWebhookFailingFor=1s",
               "prometheusRule.operatorAbsentFor=2s",
               "prometheusRule.deschedulerRunFailedWindow=1m",
               "prometheusRule.deschedulerRunFailedFor=1s",
               "prometheusRule.machineNotRunningFor=1s",
               "prometheusRule.machineNotYetDeletedFor=1s",
               "prometheusRule.machineHealthCheckShortCircuitFor=1s"]
KUBE_SCHEDULER_JOB = "kube-scheduler"
APISERVER_JOB = "apiserver"  # prometheusRule.apiServerJob's default
UNSCHEDULABLE = {"berthmaster.test/no-such-node": "anywhere"}


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Scheduler:
    """berthmaster's scheduler as a process that the tests stop and start again on one port
    (the Prometheus target stays the same)."""

    def __init__(self, cluster: RunningCluster, name: str, folder: Path):
        self.cluster, self.name, self.folder = cluster, name, folder
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._stack: contextlib.ExitStack | None = None

    async def start(self) -> None:
        args = ["scheduler", "--kubeconfig", str(self.cluster.kubeconfig),
                "--scheduler-name", self.name, "--leader-elect-lease-namespace", "default",
                "--leader-elect-lease-name", self.name,
                "--metrics-bind-address", f"127.0.0.1:{self.port}"]
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(process(args, self.folder / f"scheduler-{uuid.uuid4().hex[:4]}"
                                          ".stderr", {"KUBECONFIG": str(self.cluster.kubeconfig)}))
        await wait_for(lambda: ready(self.base), timeout=120, what="scheduler /readyz")

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None


@contextlib.contextmanager
def kube_scheduler(cluster: RunningCluster, folder: Path) -> Iterator[int]:
    """kube-scheduler against the session's API server (admin credentials, leader election on
    its default Lease kube-system/kube-scheduler); yields its secure port."""
    port = free_port()
    kubeconfig = str(cluster.kubeconfig)
    with child([str(cluster.binary("kube-scheduler")), f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1", f"--secure-port={port}"],
               folder / "kube-scheduler.log"):
        yield port


@pytest.fixture(scope="module")
def rendered(components_name: str) -> list[dict[str, Any]]:
    return render([*RULE_VALUES, f"scheduler.name={components_name}"],
                  namespace=RELEASE_NAMESPACE)


@pytest.fixture(scope="module")
def components_name() -> str:
    return f"alerts-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def jobs(rendered: list[dict[str, Any]]) -> dict[str, str]:
    """component -> the job its ServiceMonitor's targets get: the metrics Service's name."""
    return {component: one(rendered, "Service", f"-{component}-metrics")["metadata"]["name"]
            for component in ("scheduler", "operator")}


@pytest.fixture(scope="module")
async def stack(cluster: RunningCluster, crds: None, rendered: list[dict[str, Any]],
                jobs: dict[str, str], components_name: str,
                tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("alerts")
    binaries = build.build_prometheus(say=lambda line: print(line, flush=True))
    (folder / "rules.yaml").write_text(rules_file(one(rendered, "PrometheusRule")))
    name = components_name
    operator_port = free_port()
    # Cluster-wide (no --namespace): the ClusterAutoscaler is a cluster-scoped object.
    operator_args = ["operator", "--kubeconfig", str(cluster.kubeconfig), "--standalone",
                     "--liveness=",
                     "--metrics-bind-address", f"127.0.0.1:{operator_port}"]
    scheduler = Scheduler(cluster, name, folder)
    pki = cluster.root / "pki"
    # The operator's process: test_operator_absent_fires, the module's last, stops it.
    operator = contextlib.ExitStack()
    with kube_scheduler(cluster, folder) as kube_scheduler_port, operator:
        operator.enter_context(process(operator_args, folder / "operator.stderr",
                                       {"KUBECONFIG": str(cluster.kubeconfig),
                                        "BERTHMASTER_AUTOSCALER_SCAN_INTERVAL": "1"}))
        await scheduler.start()
        try:
            await wait_for(lambda: ready(f"http://127.0.0.1:{operator_port}"), timeout=120,
                           what="operator /readyz")
            config = configuration([
                scrape_config(KUBE_SCHEDULER_JOB, "kube-system",
                              f"127.0.0.1:{kube_scheduler_port}", https=True,
                              cert=(pki / "admin.crt", pki / "admin.key")),
                scrape_config(jobs["scheduler"], RELEASE_NAMESPACE, f"127.0.0.1:{scheduler.port}"),
                scrape_config(jobs["operator"], RELEASE_NAMESPACE, f"127.0.0.1:{operator_port}"),
                {**scrape_config(APISERVER_JOB, "default", cluster.server.split("://")[1],
                                 https=True, cert=(pki / "admin.crt", pki / "admin.key")),
                 # its exposition is large: more time than the others' one second
                 "scrape_interval": "2s", "scrape_timeout": "2s"},
            ], [folder / "rules.yaml"])
            async with running(binaries["prometheus"], config, folder / "prometheus") as api:
                await api.wait_scraped([KUBE_SCHEDULER_JOB, APISERVER_JOB, *jobs.values()])
                yield {"api": api, "scheduler": scheduler, "name": name, "folder": folder,
                       "operator": operator}
        finally:
            scheduler.stop()


def alerts_of_chart(rendered: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule
            for group in one(rendered, "PrometheusRule")["spec"]["groups"]
            for rule in group["rules"] if "alert" in rule}


def unschedulable_pod(name: str, scheduler_name: str) -> dict[str, Any]:
    return make_pod(name, scheduler_name, nodeSelector=dict(UNSCHEDULABLE))


async def pods_until_firing(stack: dict[str, Any], kube: KubeClient, namespace: str,
                            prefix: str, alert: str) -> tuple[dict[str, Any], int]:
    """Create one unschedulable pod for berthmaster's scheduler a second until ``alert``
    fires; the alert and the number of pods created."""
    api: PrometheusAPI = stack["api"]
    created = 0

    async def one_more_then_firing() -> list[dict[str, Any]]:
        nonlocal created
        await create_pod(kube, namespace, unschedulable_pod(f"{prefix}-{created}", stack["name"]))
        created += 1
        return await api.firing(alert)

    [firing] = await wait_for(one_more_then_firing, timeout=120, interval=1,
                              what=f"{alert} firing")
    return firing, created


# The alerts about one object (its name and namespace in the labels, from the operator's
# mapi_* and drain series).
OBJECT_ALERTS = frozenset({"BerthmasterMachineNotRunning", "BerthmasterMachineNotYetDeleted",
                           "BerthmasterMachineHealthCheckShortCircuited",
                           "BerthmasterMachineDrainStuck"})


def left_by_another_test(alert: dict[str, Any], namespace: str) -> bool:
    """An alert about an object in another test's namespace: the worker's control plane is
    shared by the test files run before this one, and a Machine one of them left behind (its
    namespace terminating, no operator of its own to finish it) is rightly not Running. Such
    an alert names that object; it never comes from kube-scheduler's series, which carry the
    job's namespace (kube-system) or none."""
    labels = alert.get("labels") or {}
    other = labels.get("namespace")
    return (labels.get("alertname") in OBJECT_ALERTS and other is not None
            and other not in (namespace, RELEASE_NAMESPACE, "kube-system", "default"))


async def test_nothing_fires_while_kube_scheduler_has_pending_pods(
        stack: dict[str, Any], rendered: list[dict[str, Any]], jobs: dict[str, str],
        kube: KubeClient, namespace: str) -> None:
    """kube-scheduler's unschedulable pods rise past the threshold; the PendingPodsRising
    expression without its scope would match them; with it, after the rules ran on those
    samples, no alert of the chart is pending or firing, and every rule evaluates without
    error."""
    api: PrometheusAPI = stack["api"]
    for index in range(THRESHOLD + 2):
        await create_pod(kube, namespace, unschedulable_pod(f"kube-{index}", "default-scheduler"))
    kube_pending = (f'sum(scheduler_pending_pods{{job="{KUBE_SCHEDULER_JOB}", '
                    f'queue=~"unschedulable|backoff"}}) > {THRESHOLD}')
    await wait_for(lambda: api.query(kube_pending), timeout=90,
                   what="kube-scheduler's pending pods above the threshold in Prometheus")
    scope = f'job="{jobs["scheduler"]}", namespace="{RELEASE_NAMESPACE}"'
    rising = alerts_of_chart(rendered)["BerthmasterPendingPodsRising"]["expr"]
    assert scope in rising
    unscoped = rising.replace(f"{{{scope}}}", "").replace(f", {scope}", "")
    assert await api.query(unscoped), f"without its scope {unscoped!r} matches nothing"
    leases = await api.query(f'leader_election_master_status{{job="{KUBE_SCHEDULER_JOB}"}}')
    assert leases, "kube-scheduler exports leader_election_master_status as well"
    await api.wait_evaluations(after=now(), times=3)
    assert [alert for alert in await api.alerts()
            if not left_by_another_test(alert, namespace)] == []
    rules = [rule for group in await api.groups() for rule in group["rules"]]
    assert {rule["name"] for rule in rules} == set(alerts_of_chart(rendered))
    assert all(rule["health"] == "ok" for rule in rules), rules


async def test_pending_pods_rising_fires(stack: dict[str, Any], kube: KubeClient,
                                         namespace: str) -> None:
    """Pods for berthmaster's scheduler that no node fits keep coming: once more than the
    threshold wait unschedulable and the count rose for pendingPodsWindow, the alert fires."""
    alert, created = await pods_until_firing(stack, kube, namespace, "ours",
                                             "BerthmasterPendingPodsRising")
    assert alert["labels"]["severity"] == "warning"
    assert created > THRESHOLD


async def test_autoscaler_unsafe_fires(stack: dict[str, Any], cluster: RunningCluster,
                                      kube: KubeClient, nodes: NodeFactory) -> None:
    """A ClusterAutoscaler starts the operator's autoscaler loop; four nodes of the cluster's
    four turn NotReady (kwok's node-not-ready stage): more than 3 and more than 45% unready
    (operator/autoscaler/clusterstate.py, upstream's --ok-total-unready-count and
    --max-total-unready-percentage), the loop reports cluster_autoscaler_cluster_safe_to_autoscale
    0 and BerthmasterAutoscalerUnsafe fires."""
    api: PrometheusAPI = stack["api"]
    names = [(await nodes.create())["metadata"]["name"] for _ in range(4)]
    body = {"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "metadata": {"name": "default"}, "spec": {}}
    applied = cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    assert applied.returncode == 0, applied.stderr
    try:
        for name in names:
            await make_node_not_ready(kube, name)
        [alert] = await wait_for(lambda: api.firing("BerthmasterAutoscalerUnsafe"),
                                 timeout=120, what="BerthmasterAutoscalerUnsafe firing")
        assert alert["labels"]["severity"] == "warning"
    finally:
        deleted = cluster.kubectl("delete", "clusterautoscaler", "default", "--wait=true",
                                  "--timeout=60s")
        assert deleted.returncode == 0, deleted.stderr


async def test_machine_drain_stuck_fires(stack: dict[str, Any], kube: KubeClient,
                                        namespace: str) -> None:
    """A Machine whose Node runs two pods a PodDisruptionBudget keeps (minAvailable 2) is
    deleted: the drain's evictions are refused (k8s.io/kubectl pkg/drain/drain.go), the
    operator exports berthmaster_machine_drain_started_timestamp_seconds for it, and past
    drainStuckSeconds BerthmasterMachineDrainStuck fires for that Machine. The budget then
    relents and the Machine goes."""
    api: PrometheusAPI = stack["api"]
    name = f"{namespace}-stuck"
    await machine_with_web_pods(kube, namespace, name)
    await pdb(kube, namespace, 2)
    await pdb_settled(kube, namespace, 2)
    await kube.delete(machine_api.machine_path(namespace, name))
    try:
        [alert] = await wait_for(lambda: api.firing("BerthmasterMachineDrainStuck"),
                                 timeout=120, what="BerthmasterMachineDrainStuck firing")
        assert (alert["labels"]["namespace"], alert["labels"]["name"],
                alert["labels"]["node"]) == (namespace, name, name)
        assert alert["annotations"]["summary"].startswith(
            f"The drain of Machine {namespace}/{name} has run for more than 1 s")
    finally:
        await pdb(kube, namespace, 0)
        await gone(kube, namespace, name)


async def machine_alert(api: PrometheusAPI, alert: str, namespace: str,
                        name: str) -> dict[str, Any]:
    """``alert`` firing for Machine namespace/name."""
    async def firing() -> list[dict[str, Any]]:
        return [a for a in await api.firing(alert)
                if (a["labels"].get("namespace"), a["labels"].get("name")) == (namespace, name)]

    [found] = await wait_for(firing, timeout=120, what=f"{alert} firing for {namespace}/{name}")
    return found


async def test_machine_not_running_fires(stack: dict[str, Any], kube: KubeClient,
                                         namespace: str) -> None:
    """A Running kwok Machine's instance (its Node) is deleted outside the Machine API: the
    operator turns the Machine Failed (machine-api-operator pkg/controller/machine/
    controller.go, Reconcile: ``can't find created instance``), its
    mapi_machine_created_timestamp_seconds series carries phase Failed, and
    BerthmasterMachineNotRunning (machine-api-operator's MachineWithNoRunningPhase) fires for
    it."""
    api: PrometheusAPI = stack["api"]
    name = f"{namespace}-vanished"
    await kube.create(machine_api.machine_path(namespace), kwok_machine(name))
    try:
        await running_machine(kube, namespace, name)
        await kube.delete(machine_api.node_path(name))
        alert = await machine_alert(api, "BerthmasterMachineNotRunning", namespace, name)
        assert alert["labels"]["severity"] == "warning"
        machine = await get_machine(kube, namespace, name)
        assert machine is not None and machine["status"]["phase"] == "Failed"
    finally:
        await kube.delete(machine_api.machine_path(namespace, name))
        await gone(kube, namespace, name)


async def test_machine_not_yet_deleted_fires(stack: dict[str, Any], kube: KubeClient,
                                             namespace: str) -> None:
    """A Machine with a preDrain lifecycle hook is deleted: the hook holds it in phase Deleting
    (machine-api-operator pkg/controller/machine/controller.go, before drainNode) and
    BerthmasterMachineNotYetDeleted (machine-api-operator's MachineNotYetDeleted) fires for it;
    the hook removed, the Machine goes."""
    api: PrometheusAPI = stack["api"]
    name = f"{namespace}-held"
    await kube.create(machine_api.machine_path(namespace),
                      kwok_machine(name, pre_drain=[("Hold", "alerts-test")]))
    try:
        await running_machine(kube, namespace, name)
        await kube.delete(machine_api.machine_path(namespace, name))
        alert = await machine_alert(api, "BerthmasterMachineNotYetDeleted", namespace, name)
        assert alert["labels"]["severity"] == "warning"
        machine = await get_machine(kube, namespace, name)
        assert machine is not None and machine["status"]["phase"] == "Deleting"
    finally:
        await set_hooks(kube, namespace, name, "preDrain", [])
        await gone(kube, namespace, name)


async def test_machine_health_check_short_circuited_fires(stack: dict[str, Any],
                                                          kube: KubeClient,
                                                          namespace: str) -> None:
    """Two of a MachineSet's three kwok Machines have NotReady Nodes (kwok's node-not-ready
    stage) and a MachineHealthCheck over them allows one unhealthy: it short-circuits
    (machine-api-operator pkg/controller/machinehealthcheck/machinehealthcheck_controller.go,
    isAllowedRemediation; pkg/metrics/metrics.go, mapi_machinehealthcheck_short_circuit 1) and
    BerthmasterMachineHealthCheckShortCircuited (machine-api-operator's
    MachineHealthCheckUnterminatedShortCircuit) fires for the check."""
    api: PrometheusAPI = stack["api"]
    name = f"{namespace}-w"
    await kube.create(machine_api.machineset_path(namespace), workers(name, 3))
    machines = await settle(kube, namespace, name, 3)
    sick = [node_of(machine) for machine in machines[:2]]
    try:
        for node in sick:
            await make_node_not_ready(kube, node)
        await kube.create(mhc_path(namespace), health_check("mhc", name, maxUnhealthy=1))
        await check_status(kube, namespace, "mhc", expectedMachines=3, currentHealthy=1,
                           remediationsAllowed=0, allowed="False")
        alert = await machine_alert(api, "BerthmasterMachineHealthCheckShortCircuited",
                                    namespace, "mhc")
        assert alert["labels"]["severity"] == "warning"
    finally:
        await kube.delete(mhc_path(namespace, "mhc"))
        for node in sick:
            await label(kube, resource_path(CORE, "nodes", name=node), {NODE_NOT_READY: None})
        await kube.delete(machine_api.machineset_path(namespace, name))
        for machine in machines:
            await gone(kube, namespace, machine["metadata"]["name"])


def condition_of(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    return next((dict(c) for c in ((obj or {}).get("status") or {}).get("conditions") or ()
                 if c.get("type") == type_), None)


async def test_descheduler_run_failed_fires(stack: dict[str, Any], cluster: RunningCluster,
                                           kube: KubeClient, namespace: str) -> None:
    """A Descheduler (no schedule) becomes a Job in the operator's namespace (``berthmaster``,
    the default of ``$POD_NAMESPACE``; operator/deschedulers/runs.py), its pod kept off every
    node by the Descheduler's nodeSelector. The pod fails (its status phase Failed, as a
    kubelet reports a container that exited non-zero); the Job's backoffLimit is 0, so the
    job controller marks the Job Failed (k8s.io/kubernetes pkg/controller/job/job_controller.go,
    BackoffLimitExceeded); the operator counts the run in
    ``berthmaster_descheduler_runs_total{result="failed"}`` (operator/deschedulers/run_metrics.py)
    and reports LastRunSucceeded False; BerthmasterDeschedulerRunFailed fires for that
    Descheduler."""
    api: PrometheusAPI = stack["api"]
    name = f"{namespace}-fails"
    # The run's namespace and the account its pod runs as (the chart creates both); the
    # namespace is deleted afterwards when this test made it (the control plane is shared).
    made_namespace = await kube.get_if_exists(
        resource_path(CORE, "namespaces", None, RELEASE_NAMESPACE)) is None
    prerequisites = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": RELEASE_NAMESPACE}}]}
    applied = cluster.kubectl("apply", "-f", "-", input=json.dumps(prerequisites))
    assert applied.returncode == 0, applied.stderr
    path = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers", None, name)
    await kube.create(resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers"), {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"dryRun": True, "nodeSelector": dict(UNSCHEDULABLE),
                 "policy": {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
                            "strategies": {"RemoveDuplicates": {"enabled": True}}}}})
    try:
        pods_path = resource_path(CORE, "pods", RELEASE_NAMESPACE)

        async def run_pod() -> dict[str, Any] | None:
            pods, _ = await kube.list_all(pods_path, labelSelector=f"{OWNER_LABEL}={name}")
            return pods[0] if pods else None

        pod = await wait_for(run_pod, timeout=60, what=f"the pod of Descheduler {name}'s Job")
        assert not pod["spec"].get("nodeName")
        await kube.patch(f"{pods_path}/{pod['metadata']['name']}/status", {"status": {
            "phase": "Failed", "reason": "Error", "message": "the descheduler exited with 1"}})

        async def reported_failed() -> dict[str, Any] | None:
            found = condition_of(await kube.get_if_exists(path), "LastRunSucceeded")
            return found if found and found["status"] == "False" else None

        reported = await wait_for(reported_failed, timeout=90,
                                  what=f"Descheduler {name}: LastRunSucceeded False")
        assert reported["reason"] == "JobFailed"
        alerts = await wait_for(lambda: api.firing("BerthmasterDeschedulerRunFailed"),
                                timeout=90, what="BerthmasterDeschedulerRunFailed firing")
        [alert] = [a for a in alerts if a["labels"].get("descheduler") == name]
        assert alert["labels"]["severity"] == "warning"
        assert alert["annotations"]["summary"] == (
            f"A run of Descheduler {name} failed in the last 1m.")
        succeeded = await api.query(f'berthmaster_descheduler_runs_total{{descheduler="{name}", '
                                    f'result="succeeded"}}')
        assert [sample["value"][1] for sample in succeeded] == ["0"]
    finally:
        await kube.delete(path)
        if made_namespace:
            await kube.delete(resource_path(CORE, "namespaces", None, RELEASE_NAMESPACE))


async def test_admission_webhook_failing_fires(stack: dict[str, Any], cluster: RunningCluster,
                                              kube: KubeClient, namespace: str) -> None:
    """A MutatingWebhookConfiguration whose webhook has the chart's name,
    ``pod-placement.berthmaster.io``, covering only the test's namespace, points at a port
    nothing listens on, with failurePolicy Ignore: each pod created there is admitted after the
    API server's call failed, which it counts in apiserver_admission_webhook_fail_open_count
    (k8s.io/apiserver pkg/admission/plugin/webhook/mutating/dispatcher.go); scraped from the
    API server, BerthmasterAdmissionWebhookFailing fires."""
    api: PrometheusAPI = stack["api"]
    name = f"{namespace}-placement"
    body = {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [{
                "name": "pod-placement.berthmaster.io", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": 1,
                "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/mutate"},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["pods"]}]}]}
    applied = cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    assert applied.returncode == 0, applied.stderr
    try:
        alert, _ = await pods_until_firing(stack, kube, namespace, "hooked",
                                           "BerthmasterAdmissionWebhookFailing")
        assert alert["labels"]["severity"] == "critical"  # the chart's failurePolicy Fail
        failed = await api.query('apiserver_admission_webhook_fail_open_count'
                                 '{name="pod-placement.berthmaster.io"}')
        assert failed, "the API server counted no failed call"
    finally:
        deleted = cluster.kubectl("delete", "mutatingwebhookconfiguration", name,
                                  "--ignore-not-found")
        assert deleted.returncode == 0, deleted.stderr


async def test_scheduler_not_leading_fires(stack: dict[str, Any],
                                           cluster: RunningCluster) -> None:
    """Another identity holds the scheduler's Lease: the restarted scheduler stands by
    (leader_election_master_status 0) and BerthmasterSchedulerNotLeading fires."""
    api: PrometheusAPI = stack["api"]
    scheduler: Scheduler = stack["scheduler"]
    name = stack["name"]
    scheduler.stop()
    stamp = now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"holderIdentity": "another-replica", "leaseDurationSeconds": 3600,
                      "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 1}}
    cluster.kubectl("delete", "lease", name, "-n", "default", "--ignore-not-found")
    created = cluster.kubectl("create", "-f", "-", input=json.dumps(lease))
    assert created.returncode == 0, created.stderr
    await scheduler.start()
    _, text = await http_get(f"{scheduler.base}/metrics")
    assert f'leader_election_master_status{{name="{name}"}} 0.0' in text
    [alert] = await wait_for(lambda: api.firing("BerthmasterSchedulerNotLeading"), timeout=90,
                             what="BerthmasterSchedulerNotLeading firing")
    assert alert["labels"]["severity"] == "critical"
    assert not await api.firing("BerthmasterSchedulerAbsent")


async def test_scheduler_absent_fires(stack: dict[str, Any]) -> None:
    """berthmaster's scheduler stops: its series go stale and BerthmasterSchedulerAbsent fires
    (kube-scheduler's scheduler_pending_pods, still scraped, does not count)."""
    api: PrometheusAPI = stack["api"]
    stack["scheduler"].stop()
    [alert] = await wait_for(lambda: api.firing("BerthmasterSchedulerAbsent"), timeout=90,
                             what="BerthmasterSchedulerAbsent firing")
    assert alert["labels"]["severity"] == "critical"
    assert await api.query(f'scheduler_pending_pods{{job="{KUBE_SCHEDULER_JOB}"}}')


def dashboards(rendered: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """file name -> dashboard, as the chart's ConfigMap ships them."""
    data = one(rendered, "ConfigMap", "-dashboards")["data"]
    assert data, "the dashboards ConfigMap carries no dashboard"
    return {name: json.loads(text) for name, text in data.items()}


def test_each_dashboard_fits_grafanas_dashboard_model(rendered: list[dict[str, Any]]) -> None:
    """Every field of every shipped dashboard is one Grafana's dashboard model declares, with
    the type it declares (tests/support/grafana_model.py)."""
    for name, dashboard in dashboards(rendered).items():
        assert grafana_model.problems(dashboard) == [], name


async def test_every_panel_query_evaluates_and_is_scoped(
        stack: dict[str, Any], rendered: list[dict[str, Any]], jobs: dict[str, str]) -> None:
    """Each panel's PromQL selects on the dashboard's ``$job`` and ``$namespace`` variables in
    every selector (``$job`` alone for ``OWN_NAMESPACE``), and, with them substituted as
    Grafana does, Prometheus evaluates it without error; so does each variable's
    ``label_values`` selector."""
    api: PrometheusAPI = stack["api"]
    variables = {"$job": "|".join(jobs.values()), "$namespace": RELEASE_NAMESPACE,
                 "$__rate_interval": "1m", "$__interval": "1s", "$__range": "5m"}
    failures = []
    checked = 0
    for name, dashboard in dashboards(rendered).items():
        expressions = [(f"{name} panel {panel['title']!r}", target["expr"], True)
                       for panel in dashboard["panels"] for target in panel.get("targets", [])]
        expressions += [
            (f"{name} variable {v['name']!r}",
             re.fullmatch(r"label_values\((.*), *\w+\)", v["query"]["query"]).group(1), False)
            for v in dashboard["templating"]["list"] if v["type"] == "query"]
        for where, expression, scoped in expressions:
            checked += 1
            if scoped:
                for selector in selectors(expression):
                    scope = {("job", "=~", "$job")}
                    if selector.name not in OWN_NAMESPACE:
                        scope.add(("namespace", "=", "$namespace"))
                    if not scope <= set(selector.matchers):
                        failures.append(f"{where}: {selector.name} is not scoped by "
                                        f"{sorted(scope)}")
            query = expression
            for variable in sorted(variables, key=len, reverse=True):
                query = query.replace(variable, variables[variable])
            error = await api.query_error(query)
            if error is not None:
                failures.append(f"{where}: {query!r}: {error}")
    assert checked > 20
    assert not failures, "\n".join(failures)


# Families whose samples carry the object's own `namespace` label, which the ServiceMonitors'
# honorLabels keep (a Machine's, a MachineSet's, an evicted pod's): scoped by job alone.
# machine-api-operator pkg/metrics/metrics.go, descheduler metrics/metrics.go.
OWN_NAMESPACE = {"mapi_machine_created_timestamp_seconds", "mapi_machine_set_status_replicas",
                 "mapi_machine_set_status_replicas_ready",
                 "berthmaster_machine_drain_started_timestamp_seconds",
                 "descheduler_pods_evicted_total"}


def expand(template: str, labels: dict[str, str]) -> str:
    """An annotation with its ``{{ $labels.name }}`` references filled in, as Prometheus'
    template expander does for these (template/template.go)."""
    text = re.sub(r"\{\{ *\$labels\.(\w+) *\}\}", lambda m: labels[m.group(1)], template)
    assert "{{" not in text, f"another template in {template!r}"
    return text


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    """An input series of a promtool rule unit test (cmd/promtool/unittest.go)."""
    matchers = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{matchers}}}", "values": values}


def expected_alert(rule: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The alert promtool expects of ``rule`` for a series with ``labels``."""
    return {"exp_labels": {**labels, **rule["labels"]},
            "exp_annotations": {key: expand(value, labels)
                                for key, value in rule["annotations"].items()}}


def promtool_test_rules(folder: Path, tests: dict[str, Any]) -> None:
    """``promtool test rules`` over ``tests`` (written to ``folder``, beside its rule files)."""
    (folder / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    promtool = build.build_prometheus(say=lambda line: print(line, flush=True))["promtool"]
    result = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=folder,
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_operator_alerts_fire_under_promtool(tmp_path: Path) -> None:
    """BerthmasterMachineDrainStuck and BerthmasterAutoscalerUnsafe, with the chart's default
    thresholds and ``for:``, by promtool's rule unit tests (cmd/promtool/unittest.go) over
    input series: a drain running for more than 30 minutes, and the cluster unsafe to
    autoscale for more than 15 (and quiet again 5 minutes after the loop stopped: the
    ClusterAutoscaler deleted, the gauge keeping its last value). Same-named series of other
    jobs (cluster-autoscaler's own gauge, another exporter's drain) older and worse than ours
    never fire (each eval_time lists exactly the alerts expected, annotations expanded)."""
    objects = render(["prometheusRule.enabled=true"], namespace=RELEASE_NAMESPACE)
    rules = alerts_of_chart(objects)
    job = one(objects, "Service", "-operator-metrics")["metadata"]["name"]
    (tmp_path / "rules.yaml").write_text(rules_file(one(objects, "PrometheusRule")))
    machine = {"job": job, "namespace": "openshift-machine-api", "name": "worker-a",
               "node": "node-a"}
    elsewhere = {**machine, "job": "machine-api-operator"}
    ours = {"job": job, "namespace": RELEASE_NAMESPACE}
    upstream = {"job": "cluster-autoscaler", "namespace": "kube-system"}

    def expected(alert: str, labels: dict[str, str]) -> dict[str, Any]:
        return expected_alert(rules[alert], labels)

    drain = "berthmaster_machine_drain_started_timestamp_seconds"
    safe = "cluster_autoscaler_cluster_safe_to_autoscale"
    activity = "cluster_autoscaler_last_activity"
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            # started at 0 s: past 1800 s from 31m, for 5m -> firing from 36m
            series(drain, machine, "0x60"),
            # a drain started at 35m is not stuck at 40m
            series(drain, {**machine, "name": "worker-b", "node": "node-b"}, "2100x60"),
            series(drain, elsewhere, "0x60"),
            # ours unsafe from 10m, for 15m -> firing from 25m; upstream's unsafe throughout
            series(safe, ours, "1x9 0x50"),
            series(activity, {**ours, "activity": "main"}, "0+60x60"),
            series(safe, upstream, "0x60"),
            series(activity, {**upstream, "activity": "main"}, "0+60x60"),
        ],
        "alert_rule_test": [
            {"eval_time": "34m", "alertname": "BerthmasterMachineDrainStuck", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "BerthmasterMachineDrainStuck",
             "exp_alerts": [expected("BerthmasterMachineDrainStuck", machine)]},
            {"eval_time": "24m", "alertname": "BerthmasterAutoscalerUnsafe", "exp_alerts": []},
            {"eval_time": "30m", "alertname": "BerthmasterAutoscalerUnsafe",
             "exp_alerts": [expected("BerthmasterAutoscalerUnsafe", {})]},
        ],
    }, {
        "interval": "1m",
        "input_series": [
            # unsafe from 10m; the ClusterAutoscaler deleted at 40m: the loop stops, the gauge
            # keeps its 0 and last_activity its last time
            series(safe, ours, "1x9 0x50"),
            series(activity, {**ours, "activity": "main"}, "0+60x40 2400x20"),
        ],
        "alert_rule_test": [
            {"eval_time": "40m", "alertname": "BerthmasterAutoscalerUnsafe",
             "exp_alerts": [expected("BerthmasterAutoscalerUnsafe", {})]},
            {"eval_time": "44m", "alertname": "BerthmasterAutoscalerUnsafe",
             "exp_alerts": [expected("BerthmasterAutoscalerUnsafe", {})]},
            {"eval_time": "46m", "alertname": "BerthmasterAutoscalerUnsafe", "exp_alerts": []},
            {"eval_time": "60m", "alertname": "BerthmasterAutoscalerUnsafe", "exp_alerts": []},
        ],
    }]}
    promtool_test_rules(tmp_path, tests)


def test_machine_operator_and_descheduler_alerts_fire_under_promtool(tmp_path: Path) -> None:
    """BerthmasterOperatorAbsent, BerthmasterDeschedulerRunFailed,
    BerthmasterMachineHealthCheckShortCircuited,
    BerthmasterMachineNotRunning and BerthmasterMachineNotYetDeleted with the chart's default
    ``for:`` (5m; 30m, 60m and 360m as machine-api-operator's
    install/0000_90_machine-api-operator_04_alertrules.yaml
    MachineHealthCheckUnterminatedShortCircuit, MachineWithNoRunningPhase and
    MachineNotYetDeleted), by promtool's rule unit tests: the
    operator's target down (``up`` 0) and then gone; a check short-circuited, one recovering
    before its ``for:``; a Machine Provisioned past 60m, one Running, one Provisioning that
    turns Running in time; a Machine Deleting for hours. The same series of machine-api-operator
    itself (another job), in the same states throughout, never fire. A Descheduler's failed
    run (``berthmaster_descheduler_runs_total{result="failed"}`` 0 then 1) fires for the
    window (1h) after it; succeeded runs, and another release's failures, do not."""
    objects = render(["prometheusRule.enabled=true"], namespace=RELEASE_NAMESPACE)
    rules = alerts_of_chart(objects)
    job = one(objects, "Service", "-operator-metrics")["metadata"]["name"]
    (tmp_path / "rules.yaml").write_text(rules_file(one(objects, "PrometheusRule")))
    ours = {"job": job, "namespace": RELEASE_NAMESPACE}
    mhc = {"job": job, "namespace": "openshift-machine-api", "name": "workers"}
    upstream_job = {"job": "machine-api-operator"}
    created = "mapi_machine_created_timestamp_seconds"
    short = "mapi_machinehealthcheck_short_circuit"
    runs = "berthmaster_descheduler_runs_total"

    def machine(name: str, phase: str, **labels: str) -> dict[str, str]:
        return {"job": job, "namespace": "openshift-machine-api", "name": name, "node": "",
                "spec_provider_id": "", "api_version": "machine.openshift.io/v1beta1",
                "phase": phase, **labels}

    def expected(alert: str, labels: dict[str, str]) -> dict[str, Any]:
        return expected_alert(rules[alert], labels)

    def named(labels: dict[str, str]) -> dict[str, str]:
        return {"name": labels["name"], "namespace": labels["namespace"]}

    stuck = machine("worker-a", "Provisioned")
    deleting = machine("worker-d", "Deleting")
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [
        {"interval": "1m",
         "input_series": [
             # scraped and up for 10m, down from 10m, gone from 20m: pending from 10m, firing 15m
             series("up", ours, "1x9 0x9 _x30"),
             series("up", {"job": "machine-api-operator", "namespace": "openshift-machine-api"},
                    "0x50"),
         ],
         "alert_rule_test": [
             {"eval_time": "9m", "alertname": "BerthmasterOperatorAbsent", "exp_alerts": []},
             {"eval_time": "14m", "alertname": "BerthmasterOperatorAbsent", "exp_alerts": []},
             {"eval_time": "16m", "alertname": "BerthmasterOperatorAbsent",
              "exp_alerts": [expected("BerthmasterOperatorAbsent", {})]},
             {"eval_time": "40m", "alertname": "BerthmasterOperatorAbsent",
              "exp_alerts": [expected("BerthmasterOperatorAbsent", {})]},
         ]},
        {"interval": "1m",
         "input_series": [
             # a failed run at 10m: increase over 1h > 0 from 10m to 70m, for 1m
             series(runs, {**ours, "descheduler": "nightly", "result": "failed"}, "0x9 1x90"),
             series(runs, {**ours, "descheduler": "nightly", "result": "succeeded"},
                    "0+1x100"),
             series(runs, {**ours, "descheduler": "hourly", "result": "failed"}, "0x100"),
             series(runs, {"job": job, "namespace": "other", "descheduler": "nightly",
                           "result": "failed"}, "0+1x100"),
         ],
         "alert_rule_test": [
             {"eval_time": "9m", "alertname": "BerthmasterDeschedulerRunFailed",
              "exp_alerts": []},
             {"eval_time": "12m", "alertname": "BerthmasterDeschedulerRunFailed",
              "exp_alerts": [expected("BerthmasterDeschedulerRunFailed",
                                      {"descheduler": "nightly"})]},
             {"eval_time": "80m", "alertname": "BerthmasterDeschedulerRunFailed",
              "exp_alerts": []},
         ]},
        {"interval": "1m",
         "input_series": [
             # short-circuited from 5m -> firing from 35m
             series(short, mhc, "0x4 1x60"),
             # short-circuited for 20m only
             series(short, {**mhc, "name": "masters"}, "1x19 0x40"),
             series(short, {**mhc, **upstream_job}, "1x60"),
         ],
         "alert_rule_test": [
             {"eval_time": "34m", "alertname": "BerthmasterMachineHealthCheckShortCircuited",
              "exp_alerts": []},
             {"eval_time": "36m", "alertname": "BerthmasterMachineHealthCheckShortCircuited",
              "exp_alerts": [expected("BerthmasterMachineHealthCheckShortCircuited", mhc)]},
         ]},
        {"interval": "1m",
         "input_series": [
             # Provisioned throughout -> firing from 60m
             series(created, stuck, "1000x400"),
             series(created, machine("worker-b", "Running"), "1000x400"),
             # Provisioning for 50m, then Running
             series(created, machine("worker-c", "Provisioning"), "1000x49 _x350"),
             series(created, machine("worker-c", "Running"), "_x49 1000x350"),
             series(created, {**stuck, **upstream_job}, "1000x400"),
             # Deleting from 0: avg over 15m > 0 from 0 -> firing from 360m
             series(created, deleting, "1000x400"),
             series(created, {**deleting, **upstream_job}, "1000x400"),
         ],
         "alert_rule_test": [
             {"eval_time": "59m", "alertname": "BerthmasterMachineNotRunning", "exp_alerts": []},
             {"eval_time": "61m", "alertname": "BerthmasterMachineNotRunning",
              "exp_alerts": [expected("BerthmasterMachineNotRunning", named(stuck))]},
             {"eval_time": "359m", "alertname": "BerthmasterMachineNotYetDeleted",
              "exp_alerts": []},
             {"eval_time": "361m", "alertname": "BerthmasterMachineNotYetDeleted",
              "exp_alerts": [expected("BerthmasterMachineNotYetDeleted", named(deleting))]},
         ]},
    ]}
    promtool_test_rules(tmp_path, tests)


def test_admission_webhook_failing_fires_under_promtool(tmp_path: Path) -> None:
    """BerthmasterAdmissionWebhookFailing with the chart's defaults (5m window, for 5m) by
    promtool's rule unit tests, over the API server's own series (k8s.io/apiserver
    pkg/admission/metrics/metrics.go): calls failing from 10m under failurePolicy Fail
    (``rejection_count{error_type="calling_webhook_error"}``) fire from 15m; under Ignore
    (``fail_open_count``) alike. Rejections the webhook itself answers (``no_error``), another
    webhook's call errors, and a job other than ``prometheusRule.apiServerJob`` never fire."""
    hook = {"job": "apiserver", "name": "pod-placement.berthmaster.io", "type": "admit"}
    rejection = "apiserver_admission_webhook_rejection_count"
    fail_open = "apiserver_admission_webhook_fail_open_count"
    unrelated = [
        series(rejection, {**hook, "operation": "CREATE", "error_type": "no_error",
                           "rejection_code": "400"}, "0+5x60"),
        series(rejection, {**hook, "name": "other.example.com", "operation": "CREATE",
                           "error_type": "calling_webhook_error", "rejection_code": "500"},
               "0+5x60"),
        series(fail_open, {**hook, "job": "kube-apiserver-other"}, "0+5x60"),
    ]
    cases = [("Fail", series(rejection, {**hook, "operation": "CREATE",
                                         "error_type": "calling_webhook_error",
                                         "rejection_code": "500"}, "0x9 1+3x50")),
             ("Ignore", series(fail_open, hook, "0x9 1+3x50"))]
    for policy, failing in cases:
        folder = tmp_path / policy
        folder.mkdir()
        objects = render(["prometheusRule.enabled=true", "admission.enabled=true",
                          f"admission.failurePolicy={policy}"], namespace=RELEASE_NAMESPACE)
        rule = alerts_of_chart(objects)["BerthmasterAdmissionWebhookFailing"]
        (folder / "rules.yaml").write_text(rules_file(one(objects, "PrometheusRule")))
        name = "BerthmasterAdmissionWebhookFailing"
        promtool_test_rules(folder, {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                                     "tests": [{
            "interval": "1m", "input_series": [*unrelated, failing],
            "alert_rule_test": [
                {"eval_time": "14m", "alertname": name, "exp_alerts": []},
                {"eval_time": "17m", "alertname": name,
                 "exp_alerts": [expected_alert(rule, {})]},
            ]}]})


async def test_operator_absent_fires(stack: dict[str, Any], jobs: dict[str, str]) -> None:
    """The module's last test on the stack (it stops the operator for good): the operator's
    process stops, Prometheus' scrapes of its target fail (``up`` 0) and
    BerthmasterOperatorAbsent fires; the scheduler's and kube-scheduler's targets play no
    part in it."""
    api: PrometheusAPI = stack["api"]
    assert not await api.firing("BerthmasterOperatorAbsent")
    stack["operator"].close()
    [alert] = await wait_for(lambda: api.firing("BerthmasterOperatorAbsent"), timeout=90,
                             what="BerthmasterOperatorAbsent firing")
    assert alert["labels"]["severity"] == "critical"
    assert await api.query(f'up{{job="{jobs["operator"]}", namespace="{RELEASE_NAMESPACE}"}} == 0')
    assert await api.query(f'up{{job="{KUBE_SCHEDULER_JOB}"}} == 1')
