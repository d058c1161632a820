"""Shape checks on snapshot objects (berthmaster.scheduler.shape): the first wrong field, named.

The types are those of the Kubernetes API (k8s.io/api core/v1 types.go: ``PodSpec.Containers``
is a list of ``Container``, ``ResourceRequirements.Requests`` a ``ResourceList`` map, ...).
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.shape import shape_problem
from tests.support.builders import make_node, make_pod


@pytest.mark.parametrize(("kind", "obj", "problem"), [
    ("Pod", make_pod(cpu="1"), None),
    ("Node", make_node(), None),
    ("Pod", {"metadata": {"name": "a"}}, None),  # absent fields are not wrong
    ("Pod", {"spec": None, "status": None}, None),  # nor are nulls
    ("Pod", {"spec": [1]}, "spec must be an object, got [1]"),
    ("Pod", {"spec": {"containers": "x"}}, "spec.containers must be a list, got 'x'"),
    ("Pod", {"spec": {"containers": [1]}}, "spec.containers[0] must be an object, got 1"),
    # what a pod's requests read besides its containers (scheduler/pod_resources.py)
    ("Pod", {"spec": {"resources": {"requests": ["cpu"]}}},
     "spec.resources.requests must be an object, got ['cpu']"),
    ("Pod", {"status": {"containerStatuses": [{"name": "c", "resources": {"requests": "1"}}]}},
     "status.containerStatuses[0].resources.requests must be an object, got '1'"),
    ("Pod", {"status": {"initContainerStatuses": [{"allocatedResources": 2}]}},
     "status.initContainerStatuses[0].allocatedResources must be an object, got 2"),
    ("Pod", {"spec": {"initContainers": [{"name": "i", "resources": {"limits": "1"}}]}},
     "spec.initContainers[0].resources.limits must be an object, got '1'"),
    ("Pod", {"spec": {"containers": [{"ports": [{"hostPort": 1}, "80"]}]}},
     "spec.containers[0].ports[1] must be an object, got '80'"),
    ("Pod", {"spec": {"tolerations": {"key": "k"}}},
     "spec.tolerations must be a list, got {'key': 'k'}"),
    ("Pod", {"metadata": {"labels": ["a"]}}, "metadata.labels must be an object, got ['a']"),
    ("Pod", {"spec": {"containers": ["x" * 100]}},
     "spec.containers[0] must be an object, got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."),
    ("Node", {"spec": {"taints": "NoSchedule"}}, "spec.taints must be a list, got 'NoSchedule'"),
    ("Node", {"status": {"allocatable": ["cpu"]}},
     "status.allocatable must be an object, got ['cpu']"),
    ("Service", {"metadata": "web"}, "metadata must be an object, got 'web'"),
])
def test_shape_problem(kind: str, obj: dict[str, Any], problem: str | None) -> None:
    assert shape_problem(kind, obj) == problem
