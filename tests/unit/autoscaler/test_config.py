"""ClusterAutoscaler parsing: upstream defaults, and every problem named with its fix."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import (
    ConfigError,
    GpuLimit,
    ResourceRange,
    parse_cluster_autoscaler,
)


def ca(spec: dict[str, Any], name: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def test_upstream_defaults() -> None:
    config = parse_cluster_autoscaler(ca({}))
    assert config.pod_priority_threshold == -10
    assert config.max_node_provision_time == 900
    assert (config.scale_down.enabled, config.scale_down.delay_after_add,
            config.scale_down.delay_after_delete, config.scale_down.delay_after_failure,
            config.scale_down.unneeded_time, config.scale_down.utilization_threshold) == (
        True, 600, 10, 180, 600, 0.5)
    assert config.expanders == ("LeastWaste",)
    assert config.skip_nodes_with_local_storage is True


def test_the_documentation_example() -> None:
    config = parse_cluster_autoscaler(ca({
        "podPriorityThreshold": -10,
        "resourceLimits": {"maxNodesTotal": 24, "cores": {"min": 8, "max": 128},
                           "memory": {"min": 4, "max": 256},
                           "gpus": [{"type": "nvidia.com/gpu", "min": 0, "max": 16},
                                    {"type": "amd.com/gpu", "min": 0, "max": 4}]},
        "scaleDown": {"enabled": True, "delayAfterAdd": "10m", "delayAfterDelete": "5m",
                      "delayAfterFailure": "30s", "unneededTime": "5m"},
    }))
    assert config.limits.max_nodes_total == 24
    assert config.limits.cores == ResourceRange(8, 128)
    assert config.limits.memory_gib == ResourceRange(4, 256)
    assert config.limits.gpus == (GpuLimit("nvidia.com/gpu", 0, 16), GpuLimit("amd.com/gpu", 0, 4))
    assert (config.scale_down.delay_after_delete, config.scale_down.delay_after_failure,
            config.scale_down.unneeded_time) == (300, 30, 300)


def test_zero_threshold_is_kept() -> None:
    assert parse_cluster_autoscaler(ca({"podPriorityThreshold": 0})).pod_priority_threshold == 0


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_autoscaler(ca({
            "resourceLimits": {"cores": {"min": 9, "max": 8}},
            "scaleDown": {"unneededTime": "soon", "utilizationThreshold": "2"},
            "expanders": ["Cheapest"],
        }, name="mine"))
    problems = caught.value.problems
    assert any(p.startswith("metadata.name: only a ClusterAutoscaler named 'default'")
               for p in problems)
    assert any("spec.resourceLimits.cores: min 9 is greater than max 8" in p for p in problems)
    assert any(p.startswith("spec.scaleDown.unneededTime:") for p in problems)
    assert any(p.startswith("spec.scaleDown.utilizationThreshold:") for p in problems)
    assert any("unknown expander 'Cheapest'" in p for p in problems)
    assert len(problems) == 5


def test_the_fields_openshift_adds_are_kept_not_pruned() -> None:
    """openshift/cluster-autoscaler-operator pkg/apis/autoscaling/v1 ClusterAutoscalerSpec
    (``ScaleUp.NewPodScaleUpDelay``, ``ScaleDown.CordonNodeBeforeTerminating``,
    ``EnforceNodeGroupMinSize``, ``StartupTaints``, ``LogVerbosity``), which
    clusterautoscaler.go ``AutoscalerArgs`` passes as --new-pod-scale-up-delay,
    --cordon-node-before-terminating, --enforce-node-group-min-size, --startup-taint, --v."""
    config = parse_cluster_autoscaler(ca({
        "scaleUp": {"newPodScaleUpDelay": "30s"},
        "scaleDown": {"enabled": True, "cordonNodeBeforeTerminating": "Enabled"},
        "enforceNodeGroupMinSize": "Enabled",
        "startupTaints": ["node.example.com/initializing", "gpu.example.com/driver"],
        "logVerbosity": 4,
        "maxPodGracePeriod": 120,
    }))
    assert config.scale_up.new_pod_scale_up_delay == 30
    assert config.scale_down.cordon_node_before_terminating is True
    assert config.enforce_node_group_min_size is True
    assert config.startup_taints == ("node.example.com/initializing", "gpu.example.com/driver")
    assert config.log_verbosity == 4
    assert config.max_pod_grace_period == 120


def test_the_openshift_fields_default_as_upstream_flags() -> None:
    """cluster-autoscaler config/flags/flags.go: --new-pod-scale-up-delay 0s,
    --enforce-node-group-min-size false, no --startup-taint, --cordon-node-before-terminating
    true (OpenShift's operator passes that flag only when cordonNodeBeforeTerminating is set:
    cluster-autoscaler-operator clusterautoscaler.go ``ScaleDownArgs``); OpenShift's operator
    passes --v=1 by default."""
    config = parse_cluster_autoscaler(ca({}))
    assert config.scale_up.new_pod_scale_up_delay == 0
    assert config.scale_down.cordon_node_before_terminating is True
    assert parse_cluster_autoscaler(ca({"scaleDown": {"enabled": True}})) \
        .scale_down.cordon_node_before_terminating is True
    assert parse_cluster_autoscaler(ca({"scaleDown": {
        "cordonNodeBeforeTerminating": "Disabled"}})).scale_down.cordon_node_before_terminating \
        is False
    assert config.enforce_node_group_min_size is False
    assert config.startup_taints == ()
    assert config.log_verbosity == 1


@pytest.mark.parametrize(("spec", "problem"), [
    ({"scaleDown": {"utilizationThreshold": "1"}}, "above 0 and below 1"),
    ({"scaleDown": {"utilizationThreshold": "1.0"}}, "above 0 and below 1"),
    ({"scaleDown": {"utilizationThreshold": "0"}}, "above 0 and below 1"),
    ({"scaleDown": {"cordonNodeBeforeTerminating": "yes"}},
     "spec.scaleDown.cordonNodeBeforeTerminating: 'yes' is not a mode; write Enabled or Disabled"),
    ({"enforceNodeGroupMinSize": True},
     "spec.enforceNodeGroupMinSize: True is not a mode; write Enabled or Disabled"),
    ({"scaleUp": {"newPodScaleUpDelay": "soon"}}, "spec.scaleUp.newPodScaleUpDelay: 'soon'"),
    ({"startupTaints": ["a", "a"]}, "spec.startupTaints: an item is listed twice"),
    ({"startupTaints": "a"}, "spec.startupTaints: expected a list of non-empty strings"),
    ({"logVerbosity": -1}, "spec.logVerbosity: -1 is below 0"),
])
def test_bad_openshift_fields_name_the_field(spec: dict[str, Any], problem: str) -> None:
    """Validation as openshift/cluster-autoscaler-operator validator.go
    ``validateScaleDownConfig`` (utilizationThreshold strictly between 0 and 1) and
    ``validateScaleUpConfig``, and the CRD's enums."""
    with pytest.raises(ConfigError) as caught:
        parse_cluster_autoscaler(ca(spec))
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_a_threshold_just_below_one_is_accepted() -> None:
    config = parse_cluster_autoscaler(ca({"scaleDown": {"utilizationThreshold": "0.99"}}))
    assert config.scale_down.utilization_threshold == 0.99


def test_expanders_default_is_the_autoscalers_own_least_waste() -> None:
    """openshift/cluster-autoscaler-operator clusterautoscaler.go ``AutoscalerArgs`` passes
    --expander only when ``expanders`` is set, so the autoscaler's own default applies:
    ``least-waste`` in cluster-autoscaler config/flags/flags.go (openshift/kubernetes-autoscaler
    and kubernetes/autoscaler alike). The API comment in pkg/apis/autoscaling/v1 still says
    Random, from before upstream changed its default; the running behaviour is followed."""
    assert parse_cluster_autoscaler(ca({})).expanders == ("LeastWaste",)
    assert parse_cluster_autoscaler(ca({"expanders": []})).expanders == ("LeastWaste",)
