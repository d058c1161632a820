"""ServiceAccounts for tests that must run as one: its token in a kubeconfig, RBAC granted to it
for the length of a ``with`` block. Requests then meet the API server's real authorizer (403s
included), never a mocked one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path

RBAC = group_path("rbac.authorization.k8s.io", "v1")


async def service_account_kubeconfig(kube: KubeClient, cluster: Any, namespace: str,
                                     account: str, folder: Path) -> Path:
    """A kubeconfig that authenticates as the existing ServiceAccount, with a short-lived
    token from the TokenRequest API, for the API server of ``cluster.kubeconfig``."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": 3600}}
    issued = await kube.create(resource_path(CORE, "serviceaccounts", namespace, account,
                                             "token"), request)
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
              "users": [{"name": account, "user": {"token": issued["status"]["token"]}}],
              "contexts": [{"name": account, "context": {"cluster": "local", "user": account}}],
              "current-context": account}
    path = folder / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def account_kubeconfig(kube: KubeClient, cluster: Any, namespace: str, folder: Path,
                             name: str = "bare") -> Path:
    """A new ServiceAccount granted nothing, and a kubeconfig with a token of it."""
    await kube.create(resource_path(CORE, "serviceaccounts", namespace),
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    return await service_account_kubeconfig(kube, cluster, namespace, name, folder)


@contextlib.asynccontextmanager
async def granted(kube: KubeClient, namespace: str, account: str,
                  rules: list[dict[str, Any]]) -> AsyncIterator[None]:
    """A ClusterRole of ``rules`` bound to the ServiceAccount, deleted on leaving."""
    name = f"{namespace}-{account}"
    await kube.create(resource_path(RBAC, "clusterroles"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules})
    await kube.create(resource_path(RBAC, "clusterrolebindings"), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    try:
        yield
    finally:
        for plural in ("clusterrolebindings", "clusterroles"):
            with contextlib.suppress(KubeError):
                await kube.delete(resource_path(RBAC, plural, name=name))
