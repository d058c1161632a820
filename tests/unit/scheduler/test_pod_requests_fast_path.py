"""pod_requests (scheduler/pod_resources.py) sums a pod of app containers alone (no init
containers, overhead, pod-level resources or resized container statuses) in one pass; this
checks it against the whole rule it shortcuts (``general_pod_requests``: upstream's
resource.PodRequests, k8s.io/component-helpers resource/helpers.go, and the scheduler's
non-zero requests, pkg/scheduler/framework/types.go CalculateResource): the same requests and
non-zero sums, or the same error naming the container."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.pod_resources import general_pod_requests, pod_requests
from berthmaster.scheduler.quantities import QuantityError

QUANTITIES = st.sampled_from(["0", "100m", "250m", "1", "1.5", "64Mi", "1Gi", "2e3", 1, 0,
                              "bad"])
NAMES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"])
LISTS = st.one_of(st.none(), st.dictionaries(NAMES, QUANTITIES, max_size=3))
CONTAINERS = st.lists(st.fixed_dictionaries({"name": st.just("c")}, optional={
    "resources": st.fixed_dictionaries({}, optional={"requests": LISTS, "limits": LISTS})}),
    max_size=4)


def _answer(pod: dict[str, Any]) -> Any:
    try:
        return general_pod_requests(pod, "pod ns/p: spec")
    except QuantityError as error:
        return str(error)


@settings(max_examples=400)
@given(containers=CONTAINERS, empty=st.sampled_from([{}, {"initContainers": []},
                                                     {"overhead": {}}, {"resources": {}}]))
def test_the_shortcut_equals_the_general_walk(containers: list[dict[str, Any]],
                                              empty: dict[str, Any]) -> None:
    pod = {"spec": {"containers": containers, **empty},
           "status": {"containerStatuses": [{"name": "c"}]}}
    expected = _answer(pod)
    if isinstance(expected, str):
        with pytest.raises(QuantityError) as raised:
            pod_requests(pod, "pod ns/p: spec")
        assert str(raised.value) == expected
    else:
        got = pod_requests(pod, "pod ns/p: spec")
        assert got == expected
        assert list(got.requests) == list(expected.requests)
