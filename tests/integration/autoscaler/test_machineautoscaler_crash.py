"""The MachineAutoscaler handler killed after each of its writes: a MachineSet never carries our
annotations while the MachineAutoscaler lacks the finalizer that would remove them.

Upstream (openshift/cluster-autoscaler-operator, pkg/controller/machineautoscaler/
machineautoscaler_controller.go, ``Reconcile``) adds ``machinetarget.autoscaling.openshift.io``
and updates the MachineAutoscaler before it calls ``SetOwner``/``UpdateTarget`` on the target;
a crash in between leaves a finalizer with nothing to clean, never the reverse.
"""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from berthmaster.foundation.kube import KubeClient, resource_path
from berthmaster.operator.autoscaler import handlers
from tests.integration.autoscaler.test_autoscaler import (
    AUTOSCALING_BETA,
    FINALIZER,
    OWNER_KEY,
    apply,
    crds,  # noqa: F401  (fixture)
    machine_autoscaler,
    machine_set,
    machine_set_annotations,
)
from tests.support.crashing import Crash, OneWriteLife


async def test_a_crash_after_any_write_never_leaves_annotations_without_the_finalizer(
        cluster: Any, crds: None, kube: KubeClient, namespace: str,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert apply(cluster, machine_set("target", namespace)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, "target", 1, 3)).returncode == 0
    path = resource_path(AUTOSCALING_BETA, "machineautoscalers", namespace, "ma")
    posted: list[str] = []  # kopf posts events from its own loop; here they are only noted
    monkeypatch.setattr(kopf, "info", lambda body, reason, message: posted.append(reason))
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: posted.append(reason))
    ledger: list[tuple[str, str, str]] = []

    async def reconcile(client: KubeClient | OneWriteLife) -> kopf.Patch:
        async def operator_client() -> Any:
            return client

        monkeypatch.setattr(handlers, "kube", operator_client)
        body = kopf.Body(await kube.get(path))
        patch = kopf.Patch()
        await handlers.machineautoscaler_reconcile(
            body=body, spec=body.spec, status=body.status, name="ma", namespace=namespace,
            patch=patch)
        return patch

    # Each life makes one write and dies, until one has annotated the MachineSet.
    while not any("/machinesets/" in write for _, write, _ in ledger):
        assert len(ledger) < 5, f"the MachineSet was never annotated: {ledger}"
        with pytest.raises(Crash):
            await reconcile(OneWriteLife(kube, ledger))
        annotations = await machine_set_annotations(kube, namespace, "target")
        finalizers = (await kube.get(path))["metadata"].get("finalizers") or []
        if annotations.get(OWNER_KEY) == f"{namespace}/ma":
            assert FINALIZER in finalizers, f"annotated with no finalizer: {ledger}"

    patch = await reconcile(kube)  # a life that lives: the reconcile completes
    await kube.patch(f"{path}/status", {"status": dict(patch.get("status") or {})})
    annotations = await machine_set_annotations(kube, namespace, "target")
    assert annotations[OWNER_KEY] == f"{namespace}/ma"
    assert FINALIZER in ((await kube.get(path))["metadata"].get("finalizers") or [])
    await kube.patch(path, {"metadata": {"finalizers": []}})
