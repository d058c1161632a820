"""Kubernetes Events (core/v1) from the autoscaler, with upstream's component and reasons.

Design: events are named from the object's uid, the reason and the message, so the same
decision repeated every 10 s posts one event, not hundreds (the API server answers 409 for the
repeat, which is ignored); a new message (a different scale-up) is a new event. Reasons:
TriggeredScaleUp / NotTriggerScaleUp (pods), ScaleDown / ScaleDownFailed (nodes, pods),
ScaleUpTimedOut (MachineSets), as cluster-autoscaler emits them; and the MachineAutoscaler
controller's InvalidOrMissingGPUAcceleratorLabel warning (:func:`gpu_label_warning`). A node
group is named in messages by upstream's id, ``MachineSet/<namespace>/<name>``
(:func:`node_group_id`; the clusterapi provider's ``unstructuredScalableResource.ID``, printed
by ``ScaleUpInfo.String``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator import events as shared_events
from berthmaster.scheduler.model import QuantityError, parse_quantity

COMPONENT = "cluster-autoscaler"
TRIGGERED_SCALE_UP = "TriggeredScaleUp"
NOT_TRIGGER_SCALE_UP = "NotTriggerScaleUp"
SCALE_DOWN = "ScaleDown"
SCALE_DOWN_FAILED = "ScaleDownFailed"
SCALE_UP_TIMED_OUT = "ScaleUpTimedOut"

log = logging.getLogger("berthmaster.operator.autoscaler")


def node_group_id(group_id: str) -> str:
    """Upstream's node group id for our ``<namespace>/<name>`` group key."""
    return f"MachineSet/{group_id}"


def build_event(involved: Mapping[str, Any], reason: str, message: str, now: datetime,
                event_type: str = "Normal", component: str = COMPONENT) -> dict[str, Any]:
    """:func:`berthmaster.operator.events.build_event` as cluster-autoscaler posts it."""
    return shared_events.build_event(involved, reason, message, now, event_type, component)


async def post(kube: KubeClient, involved: Mapping[str, Any], reason: str, message: str,
               now: datetime, event_type: str = "Normal", component: str = COMPONENT) -> None:
    """:func:`berthmaster.operator.events.post` as cluster-autoscaler posts it."""
    await shared_events.post(kube, involved, reason, message, now, event_type, component)


# openshift/cluster-autoscaler-operator pkg/controller/machineautoscaler (machinetarget.go,
# machineautoscaler_controller.go ``UpdateTarget``) and pkg/util/validator.go: when a
# MachineAutoscaler sets new limits on a MachineSet whose ``machine.openshift.io/GPU``
# annotation promises GPUs, a Warning event on the MachineSet says when its Node labels
# (``spec.template.spec.metadata.labels``) lack a valid ``cluster-api/accelerator``.
MACHINE_AUTOSCALER_COMPONENT = "machine_autoscaler_controller"
INVALID_GPU_LABEL = "InvalidOrMissingGPUAcceleratorLabel"
GPU_CAPACITY_ANNOTATION = "machine.openshift.io/GPU"
GPU_ACCELERATOR_LABEL = "cluster-api/accelerator"
_GPU_ADVICE = ("This is not an error but may cause issues when using GPU resource limits with "
               "the Cluster Autoscaler. For more information on the proper use of these "
               "values, please see https://access.redhat.com/solutions/6055181")
# apimachinery pkg/api/validate/content/kube.go IsLabelValue, word for word
_LABEL_VALUE_FORMAT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_LABEL_VALUE = re.compile("^" + _LABEL_VALUE_FORMAT + "$")


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errors.append("a valid label must be an empty string or consist of alphanumeric "
                      "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                      "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                      f"validation is '{_LABEL_VALUE_FORMAT}')")
    return errors


def has_gpu_capacity(machine_set: Mapping[str, Any]) -> bool:
    """The GPU annotation is a whole quantity of at least 1 (``HasGPUCapacity``)."""
    value = ((machine_set.get("metadata") or {}).get("annotations") or {}).get(
        GPU_CAPACITY_ANNOTATION)
    if value is None:
        return False
    try:
        count = parse_quantity(str(value))
    except QuantityError:
        return False
    return count.denominator == 1 and count >= 1


def gpu_label_warning(machine_set: Mapping[str, Any]) -> str:
    """``WarningForInvalidGPUAcceleratorLabel``: the warning, or "" when the label is fine."""
    spec_meta = (((machine_set.get("spec") or {}).get("template") or {}).get("spec")
                 or {}).get("metadata") or {}
    labels = spec_meta.get("labels")
    if not isinstance(labels, Mapping) or GPU_ACCELERATOR_LABEL not in labels:
        name = (machine_set.get("metadata") or {}).get("name")
        kind = machine_set.get("kind") or "MachineSet"
        return f"GPU accelerator label not found on {kind} {name}. {_GPU_ADVICE}"
    value = str(labels[GPU_ACCELERATOR_LABEL])
    if not value:
        return f"GPU accelerator label is empty. {_GPU_ADVICE}"
    errors = label_value_errors(value)
    if errors:
        return (f"GPU accelerator label contains a poorly formed value: {value}, errors: "
                f"{','.join(errors)}. {_GPU_ADVICE}")
    return ""
