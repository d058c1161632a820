"""The webhook and the operator are separate processes: neither needs the other to work.

With the webhook's configurations registered (``failurePolicy: Fail``) and ``berthmaster
admission`` stopped, pods in covered namespaces are refused (the webhook really is gone) while
the operator still reconciles a Descheduler into its Job in berthmaster's own namespace (never
sent to the webhook). Then, with the operator stopped and the webhook back, pods are admitted
and mutated. Before, the webhook ran inside the operator's one replica: stopping either stopped
both, and an operator upgrade refused every pod of the covered namespaces meanwhile.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path
from berthmaster.tooling.devcluster.cluster import RunningCluster
from berthmaster.tooling.python import BERTHMASTER_CLI
from tests.integration.admission.conftest import (
    AdmissionProcess,
    create_pod,
    pod_body,
    wait_webhook_active,
)
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "deploy/crds/berthmaster.io_deschedulers.yaml"
DESCHEDULERS = resource_path(group_path("berthmaster.io", "v1alpha1"), "deschedulers")
BATCH = group_path("batch", "v1")
ANNOTATION = {"scheduler.alpha.kubernetes.io/node-selector": "env=test"}


@pytest.fixture
async def operator(cluster: RunningCluster, admission: AdmissionProcess, tmp_path: Path
                   ) -> AsyncIterator[asyncio.subprocess.Process]:
    """The operator as the chart runs it, in berthmaster's own namespace (never sent to the
    webhook): its descheduler runs go there."""
    applied = cluster.kubectl("apply", "-f", str(CRD))
    assert applied.returncode == 0, applied.stderr
    established = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                  "crd/deschedulers.berthmaster.io")
    assert established.returncode == 0, established.stderr
    log_path = tmp_path / "operator.log"
    with log_path.open("w") as log:
        process = await asyncio.create_subprocess_exec(
            *BERTHMASTER_CLI, "operator", "--only", "deschedulers",
            "--standalone", "--liveness", "", "--kubeconfig", str(cluster.kubeconfig),
            env={**os.environ, "BERTHMASTER_IMAGE": "example.org/berthmaster:test",
                 "BERTHMASTER_DESCHEDULER_SERVICE_ACCOUNT": "chart-descheduler",
                 "POD_NAMESPACE": admission.namespace, "KUBECONFIG": str(cluster.kubeconfig)},
            stdout=log, stderr=asyncio.subprocess.STDOUT)
        try:
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
                await asyncio.wait_for(process.wait(), timeout=30)
    print(log_path.read_text()[-4000:])


async def test_each_works_without_the_other(admission: AdmissionProcess, kube: KubeClient,
                                            project: Any,
                                            operator: asyncio.subprocess.Process) -> None:
    covered = await project(ANNOTATION)
    admission.stop()
    with pytest.raises(KubeError) as caught:
        await create_pod(kube, covered, pod_body("refused"))
    assert 'failed calling webhook "pod-placement.berthmaster.io"' in caught.value.message

    name = f"alone-{admission.namespace}"
    await kube.create(DESCHEDULERS, {
        "apiVersion": "berthmaster.io/v1alpha1", "kind": "Descheduler",
        "metadata": {"name": name},
        "spec": {"namespace": admission.namespace, "dryRun": True,
                 "policy": {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
                            "strategies": {"RemoveDuplicates": {"enabled": True}}}}})
    try:
        job = await wait_for(lambda: kube.get_if_exists(resource_path(
            BATCH, "jobs", admission.namespace, f"{name}-descheduler-job-1")), timeout=90,
            what="the operator's Job with the webhook gone")
        assert job["metadata"]["namespace"] == admission.namespace
    finally:
        await kube.delete(f"{DESCHEDULERS}/{name}")

    operator.terminate()
    await asyncio.wait_for(operator.wait(), timeout=30)
    admission.start()
    await wait_webhook_active(kube)
    pod = await create_pod(kube, covered, pod_body("admitted"))
    assert pod["spec"]["nodeSelector"] == {"env": "test"}
