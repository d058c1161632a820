"""Out-of-tree plugins in the running scheduler, against the real API server: a plugin found
through the ``berthmaster.plugins`` entry point group and enabled by a configuration file
changes where pods go; a plugin that raises fails its pod as kube-scheduler fails it
(pkg/scheduler/framework/runtime/framework.go: ``running "X" filter plugin: <err>``;
pkg/scheduler/schedule_one.go: PodScheduled=False reason SchedulerError, then a backoff retry),
is counted in ``scheduler_plugin_execution_duration_seconds`` (pkg/scheduler/metrics/
metrics.go) and the scheduler goes on serving other pods; a bad configuration (an unknown
plugin, arguments the plugin's validation refuses, a package that fails to import) exits 2
naming the field.

The plugins are made discoverable as an installed package is: a ``*.dist-info`` with its
``entry_points.txt`` on ``sys.path`` (tests/support/plugins.py), the example's sources from
examples/plugins/licensed-nodes."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient
from berthmaster.scheduler.config import load_config
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.scheduler.schedkit import (
    create_pod,
    events_for,
    get_pod,
    make_pod,
    node_of,
)
from tests.support import plugins
from tests.support.waiting import wait_for

LICENSED = "licenses.example.com/matlab"


def _enabling(scheduler: str, *plugins: str) -> str:
    """A configuration of one profile for ``scheduler`` with ``plugins`` enabled at every
    extension point they implement (multiPoint)."""
    enabled = ", ".join(f"{{name: {name}}}" for name in plugins)
    return ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"profiles:\n- schedulerName: {scheduler}\n  plugins:\n    multiPoint:\n"
            f"      enabled: [{enabled}]\n")


async def failed_scheduling(kube: KubeClient, namespace: str, pod: str
                            ) -> list[dict[str, Any]]:
    """The FailedScheduling Events of one pod."""
    return [e for e in await events_for(kube, namespace, "FailedScheduling")
            if e["involvedObject"]["name"] == pod]


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "site"
    with plugins.installed(root):
        yield root


def _config(name: str) -> str:
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: {name}
  plugins:
    multiPoint:
      enabled: [{{name: LicensedNodes, weight: 5}}, {{name: RaisingFilter}},
               {{name: RaisingHints}}]
  pluginConfig:
  - name: LicensedNodes
    args: {{minSeats: 1}}
"""


async def test_an_installed_plugin_places_pods_and_a_raising_one_is_contained(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any, installed: Path,
        tmp_path: Path) -> None:
    group = {"berthmaster.test/group": uuid.uuid4().hex[:8]}
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    await nodes.create(labels=group, capacity=capacity)
    licensed = (await nodes.create(labels={**group, LICENSED: "2"}, capacity=capacity)
                )["metadata"]["name"]
    # the licensed node is the busier one: without the plugin LeastAllocated avoids it
    await create_pod(kube, namespace, make_pod("load", "nobody", cpu="2", nodeName=licensed))
    path = tmp_path / "scheduler.yaml"
    path.write_text(_config(run_scheduler.name))
    sched = await run_scheduler.start(load_config(path.read_text(), str(path)))
    metrics = sched.service.metrics.registry

    await create_pod(kube, namespace, make_pod(
        "solver", sched.name, labels={"licenses.example.com/product": "matlab"},
        nodeSelector=group))
    assert await wait_for(lambda: node_of(kube, namespace, "solver"), timeout=30,
                          what="solver bound") == licensed

    await create_pod(kube, namespace, make_pod("boom", sched.name, nodeSelector=group,
                                               labels={plugins.TRIGGER: "yes"}))

    (event,) = await wait_for(lambda: failed_scheduling(kube, namespace, "boom"), timeout=30,
                              what="FailedScheduling for boom")
    assert event["type"] == "Warning"
    assert event["message"].startswith("running \"RaisingFilter\" filter plugin: 'no table "
                                       "for ")

    async def condition() -> dict[str, Any] | None:
        pod = await get_pod(kube, namespace, "boom")
        found = [c for c in (pod.get("status") or {}).get("conditions") or []
                 if c["type"] == "PodScheduled"]
        return found[0] if found else None

    scheduled = await wait_for(condition, timeout=30, what="PodScheduled on boom")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulerError")
    assert scheduled["message"] == event["message"]

    # retried with backoff: a second failed attempt, counted as an error each time
    def errors() -> float:
        return metrics.get_sample_value("scheduler_schedule_attempts_total",
                                        {"result": "error", "profile": sched.name}) or 0.0

    assert await wait_for(lambda: errors() >= 2, timeout=30, what="boom retried")
    raised = metrics.get_sample_value(
        "scheduler_plugin_execution_duration_seconds_count",
        {"plugin": "RaisingFilter", "extension_point": "Filter", "status": "Error"})
    assert raised is not None and raised >= 2
    assert metrics.get_sample_value(
        "scheduler_plugin_execution_duration_seconds_count",
        {"plugin": "LicensedNodes", "extension_point": "PreFilter", "status": "Success"})
    assert metrics.get_sample_value(
        "scheduler_plugin_evaluation_total",
        {"plugin": "LicensedNodes", "extension_point": "Filter", "profile": sched.name})

    # a plugin whose queueing hint raises after it rejected a pod: the pod is requeued on any
    # event, as upstream's queue requeues when a QueueingHintFn errs
    # (pkg/scheduler/backend/queue/scheduling_queue.go, isPodWorthRequeuing)
    await create_pod(kube, namespace, make_pod("hintless", sched.name, nodeSelector=group,
                                               labels={plugins.HINTS_TRIGGER: "yes"}))

    (event,) = await wait_for(lambda: failed_scheduling(kube, namespace, "hintless"), timeout=30,
                              what="FailedScheduling for hintless")
    assert event["message"].startswith("0/")
    assert "node(s) are not for this pod" in event["message"]

    # the scheduler keeps serving the other pods meanwhile
    await create_pod(kube, namespace, make_pod("calm", sched.name, nodeSelector=group))
    assert await wait_for(lambda: node_of(kube, namespace, "calm"), timeout=30,
                          what="calm bound")
    assert await node_of(kube, namespace, "boom") is None
    assert await node_of(kube, namespace, "hintless") is None


async def test_an_installed_permit_plugin_holds_pods_and_a_raising_reserve_is_contained(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any, installed: Path
) -> None:
    """Permit's Wait holds a pod, assumed, while the loop schedules others; another pod's
    Permit allows it through the handle (runtime/framework.go RunPermitPlugins, WaitOnPermit,
    IterateOverWaitingPods). A Reserve plugin that raises fails its pod as upstream words it
    (``running Reserve plugin "X": <err>``, runtime/framework.go RunReservePluginsReserve),
    and the scheduler goes on."""
    group = {"berthmaster.test/group": uuid.uuid4().hex[:8]}
    await nodes.create(labels=group, capacity={"cpu": "4", "memory": "8Gi", "pods": "110"})
    config = _enabling(run_scheduler.name, "HoldUntilReleased", "RaisingReserve")
    sched = await run_scheduler.start(load_config(config, "permit"))
    waiting = sched.service.waiting

    await create_pod(kube, namespace, make_pod("held", sched.name, nodeSelector=group,
                                               labels={plugins.HOLD: "yes"}))
    assert await wait_for(lambda: len(waiting) == 1, timeout=30, what="held at Permit")
    # the loop goes on meanwhile: a pod of no hold binds, and the raising Reserve is contained
    await create_pod(kube, namespace, make_pod("free", sched.name, nodeSelector=group))
    assert await wait_for(lambda: node_of(kube, namespace, "free"), timeout=30,
                          what="free bound")
    await create_pod(kube, namespace, make_pod("boom", sched.name, nodeSelector=group,
                                               labels={plugins.TRIGGER: "yes"}))

    (event, *_) = await wait_for(lambda: failed_scheduling(kube, namespace, "boom"), timeout=30,
                              what="FailedScheduling for boom")
    assert event["message"] == ('running Reserve plugin "RaisingReserve": reservation book '
                                "is closed")
    assert await node_of(kube, namespace, "held") is None

    await create_pod(kube, namespace, make_pod("release", sched.name, nodeSelector=group,
                                               labels={plugins.RELEASE: "yes"}))
    for name in ("release", "held"):
        assert await wait_for(lambda n=name: node_of(kube, namespace, n), timeout=30,
                              what=f"{name} bound")
    assert len(waiting) == 0
    assert sched.service.metrics.registry.get_sample_value(
        "scheduler_permit_wait_duration_seconds_count", {"result": "Success"}) == 1.0


async def test_a_plugin_that_hangs_fails_its_pod_and_the_scheduler_goes_on(
        kube: KubeClient, namespace: str, nodes: Any, run_scheduler: Any, installed: Path
) -> None:
    """A Filter that never returns is interrupted after ``--plugin-timeout``
    (scheduler/daemon/plugin_deadline.py; kube-scheduler has no such deadline, a Go plugin
    that hangs hangs it): its pod fails as for a plugin that raises (``running "X" filter
    plugin: <err>``, runtime/framework.go), is retried with backoff, and the other pods are
    scheduled meanwhile."""
    group = {"berthmaster.test/group": uuid.uuid4().hex[:8]}
    await nodes.create(labels=group, capacity={"cpu": "4", "memory": "8Gi", "pods": "110"})
    config = _enabling(run_scheduler.name, "HangingFilter")
    sched = await run_scheduler.start(load_config(config, "hang"), plugin_timeout=1.0)
    await create_pod(kube, namespace, make_pod("stuck", sched.name, nodeSelector=group,
                                               labels={plugins.HANG_TRIGGER: "yes"}))

    (event, *_) = await wait_for(lambda: failed_scheduling(kube, namespace, "stuck"), timeout=30,
                              what="FailedScheduling for stuck")
    assert event["message"] == ('running "HangingFilter" filter plugin: did not return within '
                                "1s and was interrupted (the scheduler's --plugin-timeout)")
    await create_pod(kube, namespace, make_pod("calm", sched.name, nodeSelector=group))
    assert await wait_for(lambda: node_of(kube, namespace, "calm"), timeout=30,
                          what="calm bound")
    assert await node_of(kube, namespace, "stuck") is None
    assert sched.service.metrics.registry.get_sample_value(
        "scheduler_plugin_execution_duration_seconds_count",
        {"plugin": "HangingFilter", "extension_point": "Filter", "status": "Error"})


@pytest.mark.parametrize(("enabled", "plugin_config", "wanted"), [
    ("NoSuchPlugin", "",
     'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "NoSuchPlugin": no such '
     "plugin in berthmaster; its plugins are: "),
    ("LicensedNodes", "  - name: LicensedNodes\n    args: {minSeats: 0}\n",
     "profiles[0].pluginConfig[0].args.minSeats: Invalid value: 0: must be an integer of at "
     "least 1"),
    ("Unimportable", "",
     'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "Unimportable": the '
     "package providing plugin 'Unimportable' failed: loading "
     "'tests.support.no_such_module:PLUGIN': ModuleNotFoundError"),
])
def test_a_bad_plugin_configuration_exits_2_naming_the_field(
        tmp_path: Path, cluster: Any, installed: Path, enabled: str, plugin_config: str,
        wanted: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\n"
                    f"profiles:\n- schedulerName: x\n  plugins:\n    multiPoint:\n"
                    f"      enabled: [{{name: {enabled}}}]\n"
                    + (f"  pluginConfig:\n{plugin_config}" if plugin_config else ""))
    # not the repository's root: its operator/ would shadow the standard library's
    search = os.pathsep.join([str(installed), str(plugins.EXAMPLE / "src")])
    environment = {**os.environ, "PYTHONPATH": search}
    result = subprocess.run(
        [*BERTHMASTER_CLI, "scheduler", "--config", str(path),
         "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True, text=True, timeout=120, env=environment, check=False)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    assert wanted in result.stderr
    if enabled == "NoSuchPlugin":
        assert f'entry point group "berthmaster.plugins" of the packages installed in ' \
               f"{installed}" in result.stderr
