"""The MachineAutoscaler's GPU accelerator label warning, on the local control plane.

openshift/cluster-autoscaler-operator pkg/controller/machineautoscaler/
machineautoscaler_controller.go ``UpdateTarget``: when new limits go onto a target whose
``machine.openshift.io/GPU`` annotation promises GPUs (machinetarget.go ``HasGPUCapacity``) and
``WarningForInvalidGPUAcceleratorLabel`` finds ``cluster-api/accelerator`` missing, empty or
malformed in ``spec.template.spec.metadata.labels``, a Warning event
``InvalidOrMissingGPUAcceleratorLabel`` goes on the target MachineSet (not on the
MachineAutoscaler), worded as pkg/util/validator.go. The handler runs in this process; the event
is posted before the MachineSet is annotated, so when the handler returns it is there or never.
"""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from berthmaster.foundation.kube import KubeClient, resource_path
from berthmaster.operator.autoscaler import handlers
from tests.integration.autoscaler.test_autoscaler import (
    AUTOSCALING_BETA,
    apply,
    crds,  # noqa: F401  (fixture)
    events_for,
    machine_autoscaler,
    machine_set,
)

ADVICE = ("This is not an error but may cause issues when using GPU resource limits with the "
          "Cluster Autoscaler. For more information on the proper use of these values, please "
          "see https://access.redhat.com/solutions/6055181")


def gpu_machine_set(name: str, namespace: str, accelerator: str | None) -> dict[str, Any]:
    body = machine_set(name, namespace)
    body["metadata"]["annotations"] = {"machine.openshift.io/GPU": "1"}
    if accelerator is not None:
        body["spec"]["template"]["spec"]["metadata"]["labels"]["cluster-api/accelerator"] = \
            accelerator
    return body


@pytest.mark.parametrize(("accelerator", "message"), [
    (None, "GPU accelerator label not found on MachineSet {name}. " + ADVICE),
    ("", "GPU accelerator label is empty. " + ADVICE),
    ("nvidia t4", "GPU accelerator label contains a poorly formed value: nvidia t4, errors: a "
     "valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
     "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
     "'my_value',  or '12345', regex used for validation is "
     "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'). " + ADVICE),
    ("nvidia-t4", None),
])
async def test_gpu_machineset_without_a_valid_accelerator_label_is_warned_about(
        cluster: Any, crds: None, kube: KubeClient, namespace: str,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, accelerator: str | None, message: str | None) -> None:
    name = "gpus"
    assert apply(cluster, gpu_machine_set(name, namespace, accelerator)).returncode == 0
    assert apply(cluster, machine_autoscaler("ma", namespace, name, 1, 3)).returncode == 0
    monkeypatch.setattr(kopf, "info", lambda body, reason, message: None)
    monkeypatch.setattr(kopf, "warn", lambda body, reason, message: None)

    async def operator_client() -> KubeClient:
        return kube

    monkeypatch.setattr(handlers, "kube", operator_client)
    path = resource_path(AUTOSCALING_BETA, "machineautoscalers", namespace, "ma")
    body = kopf.Body(await kube.get(path))
    try:
        await handlers.machineautoscaler_reconcile(body=body, spec=body.spec,
                                                   status=body.status, name="ma",
                                                   namespace=namespace, patch=kopf.Patch())
    finally:
        await kube.patch(path, {"metadata": {"finalizers": []}})
    events = await events_for(kube, namespace, name, "InvalidOrMissingGPUAcceleratorLabel")
    if message is None:
        assert events == []
        return
    assert [e["message"] for e in events] == [message.format(name=name)]
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["kind"] == "MachineSet"
    assert events[0]["source"]["component"] == "machine_autoscaler_controller"
    assert await events_for(kube, namespace, "ma", "InvalidOrMissingGPUAcceleratorLabel") == []
