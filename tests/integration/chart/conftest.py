"""The chart installed for real with ``helm install``, shared by the tests that need it.

One release per test session, in its own namespace, with a scheduler name no other test uses
(``zonal``), so the scheduler run under the chart's RBAC only ever sees its own pods. It is
uninstalled at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from berthmaster.tooling.devcluster.cluster import RunningCluster
from tests.integration.chart.chartkit import CHART, SHARED_CRDS, helm

INSTALLED_VALUES = ["scheduler.name=zonal"]


@pytest.fixture(scope="module")
def installed(cluster: RunningCluster) -> Iterator[dict[str, str]]:
    """A release of the chart for one test module, uninstalled after it (a release kept for
    the session would leave its scheduler-policy ConfigMap for ``explain`` to find)."""
    release = f"bm{uuid.uuid4().hex[:5]}"
    namespace = f"{release}-system"
    args = ["install", release, str(CHART), "--namespace", namespace, "--create-namespace",
            "--kubeconfig", str(cluster.kubeconfig), *SHARED_CRDS]
    for value in INSTALLED_VALUES:
        args += ["--set", value]
    result = helm(*args)
    assert result.returncode == 0, result.stderr
    try:
        yield {"release": release, "namespace": namespace, "notes": result.stdout,
               "prefix": f"{release}-berthmaster"}
    finally:
        helm("uninstall", release, "--namespace", namespace, "--kubeconfig",
             str(cluster.kubeconfig), "--wait=false")
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
