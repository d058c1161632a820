"""The webhook down, with each failurePolicy, and a configuration or an account refused at
start.

``Fail`` (the default): while the webhook is stopped, pods in covered namespaces are refused
with the API server's ``failed calling webhook`` and its own namespace is unaffected (the
namespaceSelector). ``Ignore`` (``--failure-policy Ignore``): pods are admitted unchanged.
Restarting the webhook reuses the certificate in its Secret.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from tests.integration.admission.conftest import (
    REGISTRATION,
    ROOT,
    AdmissionProcess,
    admission_command,
    create_pod,
    pod_body,
    wait_webhook_active,
    write_config,
)
from tests.integration.chart.test_components_under_chart_rbac import service_account_kubeconfig
from tests.support.waiting import wait_for

RBAC = group_path("rbac.authorization.k8s.io", "v1")
ANNOTATION = {"scheduler.alpha.kubernetes.io/node-selector": "env=test"}


async def failure_policy(kube: KubeClient, name: str) -> tuple[str, str]:
    mutating = await kube.get(resource_path(REGISTRATION, "mutatingwebhookconfigurations",
                                            name=name))
    validating = await kube.get(resource_path(REGISTRATION, "validatingwebhookconfigurations",
                                              name=name))
    return (mutating["webhooks"][0]["failurePolicy"],
            validating["webhooks"][0]["failurePolicy"])


async def test_fail_then_ignore(admission: AdmissionProcess, kube: KubeClient,
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

    admission.extra_args = ("--failure-policy", "Ignore")
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


async def test_an_invalid_configuration_stops_the_start(admission: AdmissionProcess,
                                                        kube: KubeClient) -> None:
    """Every problem named, exit status 2, before anything is served."""
    await write_config(kube, admission, "pluginConfig:\n  PodNodeSelector:\n    configuration:\n"
                                        "      podNodeSelectorPluginConfig:\n"
                                        "        clusterDefaultNodeSelector: k3\n"
                                        "  PodNodeConstrains: {}\n")
    process = await asyncio.create_subprocess_exec(
        *admission_command(admission.cluster.kubeconfig, 1, admission.namespace,
                           admission.name),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT))
    _, raw = await asyncio.wait_for(process.communicate(), timeout=120)
    stderr = raw.decode()
    assert process.returncode == 2, stderr
    assert (f"the admission configuration ConfigMap {admission.namespace}/{admission.name} "
            "key config.yaml has 2 problem(s):") in stderr
    assert ("pluginConfig.PodNodeSelector.configuration.podNodeSelectorPluginConfig."
            "clusterDefaultNodeSelector: invalid selector: 'k3' is not key=value") in stderr
    assert "pluginConfig.PodNodeConstrains: unknown plugin" in stderr


async def test_missing_rbac_stops_the_start(admission: AdmissionProcess, kube: KubeClient,
                                            tmp_path: Path) -> None:
    """An account without the admission rules: one line naming what it may not do, exit 2."""
    await kube.create(resource_path(CORE, "serviceaccounts", admission.namespace), {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "no-rights"}})
    role = f"{admission.name}-kopf-only"
    await kube.create(resource_path(RBAC, "clusterroles"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role},
        "rules": [{"apiGroups": ["apiextensions.k8s.io"],
                   "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
                  {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]})
    await kube.create(resource_path(RBAC, "clusterrolebindings"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "no-rights",
                      "namespace": admission.namespace}]})
    try:
        await start_without_rights(admission, kube, tmp_path)
    finally:
        for plural in ("clusterrolebindings", "clusterroles"):
            await kube.delete(resource_path(RBAC, plural, name=role))


async def start_without_rights(admission: AdmissionProcess, kube: KubeClient,
                               tmp_path: Path) -> None:
    kubeconfig = await service_account_kubeconfig(kube, admission.cluster, admission.namespace,
                                                  "no-rights", tmp_path)
    process = await asyncio.create_subprocess_exec(
        *admission_command(kubeconfig, 1, admission.namespace, admission.name),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT))
    _, raw = await asyncio.wait_for(process.communicate(), timeout=120)
    stderr = raw.decode()
    assert process.returncode == 2, stderr
    assert (f"system:serviceaccount:{admission.namespace}:no-rights may not create "
            "subjectaccessreviews.authorization.k8s.io (admission)") in stderr
    assert "grant the admission ServiceAccount its rules" in stderr
