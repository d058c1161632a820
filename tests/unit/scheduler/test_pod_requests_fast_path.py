"""pod_requests (model.py) sums a pod with neither init containers nor overhead in
_app_container_requests; this checks it against the general walk it shortcuts (upstream's
resource.PodRequests, k8s.io/component-helpers resource/helpers.go, as model.py wrote it before
the shortcut): the same requests and non-zero sums, or the same error naming the container."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.model import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    QuantityError,
    pod_requests,
    resource_list,
)


def _container(c: dict[str, Any], where: str) -> dict[str, int]:
    res = c.get("resources") or {}
    requests = resource_list(res.get("requests"), f"{where}.resources.requests")
    for name, amount in resource_list(res.get("limits"), f"{where}.resources.limits").items():
        requests.setdefault(name, amount)
    return requests


def plain_pod_requests(spec: dict[str, Any], where: str = "spec"
                       ) -> tuple[dict[str, int], dict[str, int]]:
    """The general walk, app containers only (what the shortcut covers)."""
    total: dict[str, int] = {}
    total_nz: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or ()):
        r = _container(c, f"{where}.containers[{i}]")
        for k, v in r.items():
            total[k] = total.get(k, 0) + v
        nz = {CPU: r.get(CPU) or DEFAULT_MILLI_CPU_REQUEST,
              MEMORY: r.get(MEMORY) or DEFAULT_MEMORY_REQUEST}
        for k, v in nz.items():
            total_nz[k] = total_nz.get(k, 0) + v
    return total, total_nz


QUANTITIES = st.sampled_from(["0", "100m", "250m", "1", "1.5", "64Mi", "1Gi", "2e3", 1, 0,
                              "bad"])
NAMES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"])
LISTS = st.one_of(st.none(), st.dictionaries(NAMES, QUANTITIES, max_size=3))
CONTAINERS = st.lists(st.fixed_dictionaries({"name": st.just("c")}, optional={
    "resources": st.fixed_dictionaries({}, optional={"requests": LISTS, "limits": LISTS})}),
    max_size=4)


def _answer(spec: dict[str, Any]) -> Any:
    try:
        return plain_pod_requests(spec, "pod ns/p: spec")
    except QuantityError as error:
        return str(error)


@settings(max_examples=400)
@given(containers=CONTAINERS, empty=st.sampled_from([{}, {"initContainers": []},
                                                     {"overhead": {}}]))
def test_the_shortcut_equals_the_general_walk(containers: list[dict[str, Any]],
                                              empty: dict[str, Any]) -> None:
    spec = {"containers": containers, **empty}
    expected = _answer(spec)
    if isinstance(expected, str):
        with pytest.raises(QuantityError) as raised:
            pod_requests(spec, "pod ns/p: spec")
        assert str(raised.value) == expected
    else:
        assert pod_requests(spec, "pod ns/p: spec") == expected
        assert [list(d) for d in pod_requests(spec)] == [list(d) for d in expected]
