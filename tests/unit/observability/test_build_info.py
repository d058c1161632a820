"""``berthmaster_build_info`` (berthmaster/foundation/build_info.py), Kubernetes'
``kubernetes_build_info``
for berthmaster: k8s.io/component-base metrics/prometheus/version/metrics.go (a gauge set to 1;
labels ``major``, ``minor``, ``git_version``, ..., ``go_version``, ``compiler``, ``platform``,
the latter GOOS/GOARCH as ``linux/amd64``).
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from berthmaster import __version__
from berthmaster.foundation.build_info import build_info_labels, register_build_info
from berthmaster.foundation.serving import register_runtime_collectors


@pytest.mark.parametrize(("version", "machine", "expected"), [
    ("0.1.0", "x86_64", {"major": "0", "minor": "1", "git_version": "v0.1.0",
                         "python_version": "3.11.7", "compiler": "cpython",
                         "platform": "linux/amd64"}),
    ("1.35.4", "aarch64", {"major": "1", "minor": "35", "git_version": "v1.35.4",
                           "python_version": "3.11.7", "compiler": "cpython",
                           "platform": "linux/arm64"}),
    ("0.0.0+unknown", "riscv64", {"major": "0", "minor": "0", "git_version": "v0.0.0+unknown",
                                  "python_version": "3.11.7", "compiler": "cpython",
                                  "platform": "linux/riscv64"}),
])
def test_labels(version: str, machine: str, expected: dict[str, str]) -> None:
    assert build_info_labels(version, "3.11.7", "CPython", "Linux", machine) == expected


def families(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client import generate_latest

    return {f.name: [(s.labels, s.value) for s in f.samples]
            for f in text_string_to_metric_families(generate_latest(registry).decode())}


def test_every_component_registry_exports_one_sample_set_to_1() -> None:
    """register_runtime_collectors (the scheduler's and the admission webhook's registries)
    adds it; registering again (the operator's default registry) adds nothing."""
    registry = CollectorRegistry()
    register_runtime_collectors(registry)
    register_build_info(registry)
    [(labels, value)] = families(registry)["berthmaster_build_info"]
    assert value == 1
    assert labels["git_version"] == f"v{__version__}"
    assert set(labels) == {"major", "minor", "git_version", "python_version", "compiler",
                           "platform"}


def test_the_operator_registry_exports_it() -> None:
    from prometheus_client import REGISTRY

    import berthmaster.operator.health  # noqa: F401  (registers on the default registry)

    assert len(families(REGISTRY)["berthmaster_build_info"]) == 1
