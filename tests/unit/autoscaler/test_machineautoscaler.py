"""MachineAutoscaler ownership of its MachineSet and its finalizer (pure parts)."""

from __future__ import annotations

import logging

import pytest

from berthmaster.operator.autoscaler.handlers import (
    FINALIZER,
    OWNER_KEY,
    owner_conflict,
)
from berthmaster.operator.autoscaler.loop import log_level


@pytest.mark.parametrize(("annotations", "other"), [
    ({}, None),  # nobody owns it yet: it is ours to take
    ({OWNER_KEY: "ns/mine"}, None),  # already ours
    ({OWNER_KEY: "ns/theirs"}, "ns/theirs"),  # another MachineAutoscaler's: refused
    ({OWNER_KEY: "other-ns/mine"}, "other-ns/mine"),  # the owner is namespace/name
])
def test_a_target_owned_by_another_is_refused(annotations: dict[str, str],
                                              other: str | None) -> None:
    """openshift/cluster-autoscaler-operator pkg/controller/machineautoscaler machinetarget.go
    ``SetOwner``: the owner annotation ``autoscaling.openshift.io/machineautoscaler`` holds
    ``<namespace>/<name>``; a different owner gives ErrTargetAlreadyOwned, which
    machineautoscaler_controller.go ``Reconcile`` reports as event ``FailedSetOwner``."""
    assert owner_conflict(annotations, "ns/mine") == other


def test_the_finalizer_is_upstreams() -> None:
    """machineautoscaler_controller.go ``MachineTargetFinalizer``; it is written before the
    target is annotated (tests/integration/autoscaler/test_machineautoscaler_crash.py)."""
    assert FINALIZER == "machinetarget.autoscaling.openshift.io"


@pytest.mark.parametrize(("verbosity", "level"), [
    (0, logging.INFO), (1, logging.INFO), (3, logging.INFO), (4, logging.DEBUG),
    (6, logging.DEBUG),
])
def test_log_verbosity_sets_the_autoscaler_log_level(verbosity: int, level: int) -> None:
    """OpenShift's ``logVerbosity`` becomes the autoscaler's --v (clusterautoscaler.go
    ``AutoscalerArgs``); its API calls 4 the debugging level."""
    assert log_level(verbosity) == level


@pytest.mark.parametrize(("value", "gpus"), [
    (None, False), ("0", False), ("500m", False), ("1", True), ("2", True), ("lots", False)])
def test_gpu_capacity_is_a_whole_positive_count(value: str | None, gpus: bool) -> None:
    """cluster-autoscaler-operator pkg/controller/machineautoscaler/machinetarget.go
    ``HasGPUCapacity``: the ``machine.openshift.io/GPU`` annotation parsed as a quantity that
    converts to an integer of at least 1."""
    from berthmaster.operator.autoscaler.events import has_gpu_capacity
    annotations = {} if value is None else {"machine.openshift.io/GPU": value}
    assert has_gpu_capacity({"metadata": {"annotations": annotations}}) is gpus
