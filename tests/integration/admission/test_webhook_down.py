"""The webhook down, with each failurePolicy, and a configuration refused at start.

``Fail`` (the default): while the operator is stopped, pods in covered namespaces are refused
with the API server's ``failed calling webhook`` and its own namespace is unaffected (the
namespaceSelector). ``Ignore`` (``--admission-failure-policy Ignore``): pods are admitted
unchanged. Restarting the operator reuses the certificate in its Secret.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from berthmaster.kube import CORE, KubeClient, KubeError, resource_path
from tests.integration.admission.conftest import (
    REGISTRATION,
    ROOT,
    AdmissionOperator,
    create_pod,
    pod_body,
    wait_webhook_active,
    write_config,
)
from tests.support.waiting import wait_for

ANNOTATION = {"scheduler.alpha.kubernetes.io/node-selector": "env=test"}


async def failure_policy(kube: KubeClient, name: str) -> tuple[str, str]:
    mutating = await kube.get(resource_path(REGISTRATION, "mutatingwebhookconfigurations",
                                            name=name))
    validating = await kube.get(resource_path(REGISTRATION, "validatingwebhookconfigurations",
                                              name=name))
    return (mutating["webhooks"][0]["failurePolicy"],
            validating["webhooks"][0]["failurePolicy"])


async def test_fail_then_ignore(admission: AdmissionOperator, kube: KubeClient,
                                project: Any) -> None:
    namespace = await project(ANNOTATION)
    secret = resource_path(CORE, "secrets", admission.namespace, f"{admission.name}-tls")
    ca_before = (await kube.get(secret))["data"]["ca.crt"]
    assert await failure_policy(kube, admission.name) == ("Fail", "Fail")

    admission.stop()
    with pytest.raises(KubeError) as caught:
        await create_pod(kube, namespace, pod_body("refused"))
    assert 'failed calling webhook "pod-placement.berthmaster.io"' in caught.value.message
    own = await create_pod(kube, admission.namespace, pod_body("own"))
    assert own["metadata"]["namespace"] == admission.namespace

    admission.extra_args = ("--admission-failure-policy", "Ignore")
    admission.start()
    await wait_for(lambda: is_ignore(kube, admission.name), timeout=60,
                   what="the configurations rewritten with Ignore")
    await wait_webhook_active(kube)
    assert (await kube.get(secret))["data"]["ca.crt"] == ca_before  # the Secret was reused
    admission.stop()
    admitted = await create_pod(kube, namespace, pod_body("unchanged"))
    assert not admitted["spec"].get("nodeSelector")


async def is_ignore(kube: KubeClient, name: str) -> bool:
    return await failure_policy(kube, name) == ("Ignore", "Ignore")


async def test_an_invalid_configuration_stops_the_start(admission: AdmissionOperator,
                                                        kube: KubeClient) -> None:
    """Every problem named, exit status 2, before anything is served."""
    await write_config(kube, admission, "pluginConfig:\n  PodNodeSelector:\n    configuration:\n"
                                        "      podNodeSelectorPluginConfig:\n"
                                        "        clusterDefaultNodeSelector: k3\n"
                                        "  PodNodeConstrains: {}\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "berthmaster.cli", "operator", "--kubeconfig",
        str(admission.cluster.kubeconfig), "--only", "admission", "--standalone",
        "--liveness", "", "--admission-listen", "127.0.0.1:1",
        "--admission-namespace", admission.namespace, "--admission-name", admission.name,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT))
    _, raw = await asyncio.wait_for(process.communicate(), timeout=120)
    stderr = raw.decode()
    assert process.returncode == 2, stderr
    assert (f"the admission configuration ConfigMap {admission.namespace}/{admission.name} "
            "key config.yaml has 2 problem(s):") in stderr
    assert ("pluginConfig.PodNodeSelector.configuration.podNodeSelectorPluginConfig."
            "clusterDefaultNodeSelector: invalid selector: 'k3' is not key=value") in stderr
    assert "pluginConfig.PodNodeConstrains: unknown plugin" in stderr
