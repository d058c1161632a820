"""Credentials of a ServiceAccount for tests that must run as it (its RBAC, real 403s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from berthmaster.kube import CORE, KubeClient, resource_path


async def service_account_kubeconfig(kube: KubeClient, cluster: Any, namespace: str,
                                     account: str, folder: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount, with a short-lived token from the
    TokenRequest API, for the API server of the admin kubeconfig ``cluster.kubeconfig``."""
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
