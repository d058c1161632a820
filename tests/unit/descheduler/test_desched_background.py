"""Evictions in background (upstream's alpha ``EvictionsInBackground`` gate): the
``--feature-gates`` flag, which pods count as evictions under way, and which refusals are an
evacuation rather than a failure.

Upstream: sigs.k8s.io/descheduler pkg/features/features.go, pkg/descheduler/evictions/
evictions.go (the pod informer's handler, PodEvictor.evictPod); component-base cliflag
MapStringBool and featuregate.Set for the flag's errors; openshift/
cluster-kube-descheduler-operator target_config_reconciler.go for
devEnableEvictionsInBackground."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.foundation.kube import KubeError
from berthmaster.operator.deschedulers import kubedescheduler as kd
from berthmaster.operator.deschedulers.runs import RunSettings
from berthmaster.scheduler.descheduler.evictor import (
    EVICTION_IN_PROGRESS,
    REQUEST_EVICT_ONLY,
    background_outcome,
    in_background,
)
from berthmaster.scheduler.descheduler.features import parse_feature_gates
from tests.unit.descheduler.builders import make_pod

SETTINGS = RunSettings(namespace="bm-system", service_account="bm-descheduler",
                       default_image="bm:1.0", allowed_images=frozenset({"bm:1.0"}),
                       system_critical=False)
EVACUATION = KubeError(429, "TooManyRequests", "Eviction triggered evacuation of VMI default/vm")


def test_the_gate_is_off_by_default_and_set_by_the_flag() -> None:
    assert parse_feature_gates("") == {"EvictionsInBackground": False}
    assert parse_feature_gates("EvictionsInBackground=true") == {"EvictionsInBackground": True}
    assert parse_feature_gates("EvictionsInBackground=0") == {"EvictionsInBackground": False}


@pytest.mark.parametrize(("text", "message"), [
    ("Nope=true", "unrecognized feature gate: Nope"),
    ("EvictionsInBackground", "missing bool value for EvictionsInBackground"),
    ("EvictionsInBackground=yes", 'strconv.ParseBool: parsing "yes": invalid syntax'),
])
def test_a_bad_gate_says_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_feature_gates(text)


def annotated(name: str, *keys: str, phase: str = "Running") -> dict[str, Any]:
    return make_pod(name, "n1", annotations=dict.fromkeys(keys, ""), phase=phase)


def test_an_eviction_under_way_needs_both_annotations_and_a_live_pod() -> None:
    """evictions.go's AddFunc: request-evict-only and eviction-in-progress, not finished."""
    assert in_background(annotated("a", REQUEST_EVICT_ONLY, EVICTION_IN_PROGRESS))
    assert not in_background(annotated("b", REQUEST_EVICT_ONLY))
    assert not in_background(annotated("c", EVICTION_IN_PROGRESS))
    assert not in_background(annotated("d", REQUEST_EVICT_ONLY, EVICTION_IN_PROGRESS,
                                       phase="Succeeded"))


def test_an_evacuation_is_not_a_refusal() -> None:
    """PodEvictor.evictPod: a 429 with "Eviction triggered evacuation" for a request-evict-only
    pod is assumed in background (or ignored once the pod finished); anything else is an
    ordinary refusal."""
    asked = annotated("a", REQUEST_EVICT_ONLY)
    assert background_outcome(asked, EVACUATION) == "background"
    assert background_outcome(annotated("b", REQUEST_EVICT_ONLY, phase="Failed"),
                              EVACUATION) == "finished"
    assert background_outcome(annotated("c"), EVACUATION) is None
    pdb = KubeError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                                            "disruption budget.")
    assert background_outcome(asked, pdb) is None
    assert background_outcome(asked, KubeError(500, "InternalError",
                                               "Eviction triggered evacuation")) is None


def run_command(customizations: dict[str, Any]) -> list[str]:
    kube_descheduler = {"metadata": {"name": "cluster", "uid": "u", "generation": 1},
                        "spec": {"mode": "Automatic", "profileCustomizations": customizations}}
    job = kd.build_run(kube_descheduler, SETTINGS, 0)
    return list(job["spec"]["template"]["spec"]["containers"][0]["command"])


def test_dev_enable_evictions_in_background_sets_the_runs_gate() -> None:
    """target_config_reconciler.go: devEnableEvictionsInBackground appends
    --feature-gates=EvictionsInBackground=true to the descheduler's arguments."""
    assert "--feature-gates=EvictionsInBackground=true" in run_command(
        {"devEnableEvictionsInBackground": True})
    assert not any(a.startswith("--feature-gates") for a in run_command({}))
