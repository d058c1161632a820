"""A fresh namespace for an integration test: created, ready for pods, deleted afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from tests.support.waiting import wait_for


@contextlib.asynccontextmanager
async def fresh_namespace(kube: KubeClient, name: str) -> AsyncIterator[str]:
    await kube.create(resource_path(CORE, "namespaces"),
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    async def has_default_account() -> bool:
        try:
            await kube.get(resource_path(CORE, "serviceaccounts", name, "default"))
        except KubeError:
            return False
        return True

    # Pods are refused until the serviceaccount controller has made the default account.
    await wait_for(has_default_account, timeout=30, what=f"serviceaccount default in {name}")
    try:
        yield name
    finally:
        with contextlib.suppress(KubeError):
            await kube.delete(resource_path(CORE, "namespaces", name=name))
