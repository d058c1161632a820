"""The example plugin as a user adds it (docs/plugins.md): ``pip install`` of
examples/plugins/licensed-nodes, enabled by the chart's ``scheduler.config`` value, changes
where the scheduler process places a pod on the real API server.

Nothing is simulated between the steps: pip builds and installs the package (its
``berthmaster.plugins`` entry point in its dist-info) into a directory the scheduler process
has on its path, as the plugin image's ``COPY`` into site-packages does
(examples/plugins/licensed-nodes/Dockerfile); helm renders the chart's scheduler ConfigMap
from a values file; ``berthmaster scheduler --config`` reads that ConfigMap's ``config.yaml``.
Upstream's counterpart is an out-of-tree plugin compiled into a custom kube-scheduler
(kubernetes-sigs/scheduler-plugins, cmd/scheduler/main.go: ``app.WithPlugin``) and enabled in
the profile the same way (pkg/scheduler/apis/config/types.go, ``Plugins.MultiPoint``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berthmaster.foundation.kube import KubeClient
from berthmaster.tooling.processes import terminate
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.chart.chartkit import CHART, helm
from tests.integration.scheduler.schedkit import create_pod, make_pod, node_of
from tests.support import plugins
from tests.support.waiting import wait_for

LICENSED = "licenses.example.com/matlab"


def pip_install(example: Path, target: Path, work: Path) -> None:
    """``pip install`` the example into ``target`` (a copy is built: pip would write build/
    and *.egg-info into the source tree)."""
    source = work / "licensed-nodes"
    shutil.copytree(example, source, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert result.returncode == 0, result.stdout + result.stderr


def chart_config(values: dict[str, Any], work: Path) -> str:
    """The ``config.yaml`` of the scheduler ConfigMap helm renders for ``values``."""
    path = work / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    rendered = helm("template", "berthmaster", str(CHART), "--namespace", "berthmaster",
                    "-f", str(path), "--show-only", "templates/scheduler-configmap.yaml")
    assert rendered.returncode == 0, rendered.stderr
    (configmap,) = [doc for doc in yaml.safe_load_all(rendered.stdout)
                    if doc and doc["metadata"]["name"].endswith("scheduler-config")]
    return str(configmap["data"]["config.yaml"])


@contextlib.contextmanager
def scheduler_process(config: Path, kubeconfig: str, site: Path, log: Path
                      ) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*BERTHMASTER_CLI, "scheduler", "--config", str(config),
             "--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-bind-address", ""],
            stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(site)})
        try:
            yield process
        finally:
            terminate(process, 30)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    target = tmp_path / "site"
    pip_install(plugins.EXAMPLE, target, tmp_path)
    return target


async def test_the_pip_installed_example_enabled_by_a_chart_value_places_the_pod(
        kube: KubeClient, namespace: str, nodes: Any, cluster: Any, site: Path,
        tmp_path: Path) -> None:
    # what pip installed is a distribution with the entry point the configuration names
    (info,) = site.glob("berthmaster_licensed_nodes-*.dist-info")
    assert "LicensedNodes = berthmaster_licensed_nodes:PLUGIN" in (
        info / "entry_points.txt").read_text()

    name = f"bm-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "config.yaml"
    config.write_text(chart_config({"scheduler": {"config": {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": name,
                      "plugins": {"multiPoint": {"enabled": [{"name": "LicensedNodes",
                                                              "weight": 5}]}},
                      "pluginConfig": [{"name": "LicensedNodes",
                                        "args": {"minSeats": 1}}]}]}}}, tmp_path))

    group = {"berthmaster.test/group": uuid.uuid4().hex[:8]}
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    await nodes.create(labels=group, capacity=capacity)
    licensed = (await nodes.create(labels={**group, LICENSED: "2"}, capacity=capacity)
                )["metadata"]["name"]
    # the licensed node is the busier one: without the plugin LeastAllocated avoids it
    await create_pod(kube, namespace, make_pod("load", "nobody", cpu="2", nodeName=licensed))

    log = tmp_path / "scheduler.log"
    with scheduler_process(config, str(cluster.kubeconfig), site, log) as process:
        await create_pod(kube, namespace, make_pod(
            "solver", name, labels={"licenses.example.com/product": "matlab"},
            nodeSelector=group))

        async def placed() -> str | None:
            assert process.poll() is None, log.read_text()[-4000:]
            return await node_of(kube, namespace, "solver")

        assert await wait_for(placed, timeout=60, what="solver bound") == licensed
