"""ClusterAutoscaler parsing: upstream defaults, and every problem named with its fix."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import (
    ConfigError,
    GpuLimit,
    ResourceRange,
    parse_cluster_autoscaler,
    parse_duration,
)


def ca(spec: dict[str, Any], name: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("text", "seconds"), [
    ("10s", 10.0), ("10m", 600.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1.5h", 5400.0),
    ("0", 0.0), ("2m3s", 123.0), ("100us", 1e-4),
])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "5d", "m", "1h 30m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


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
