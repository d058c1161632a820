"""qos_class is memoised on the cpu/memory quantities it reads (protection.py); this checks it
against the plain computation it replaced (upstream's ComputePodQOS, pkg/apis/core/helper/qos,
as it was written before the memo) on generated pods: every mix of requests, limits, init
containers, pod-level resources, zero, invalid and unhashable quantities."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.descheduler.protection import qos_class
from berthmaster.scheduler.model import QuantityError, parse_quantity


def _plain_add(total: dict[str, Fraction], resources: Mapping[str, Any]) -> set[str]:
    found = set()
    for name in ("cpu", "memory"):
        if name not in resources:
            continue
        try:
            amount = parse_quantity(resources[name])
        except QuantityError:
            continue
        if amount > 0:
            total[name] = total.get(name, Fraction(0)) + amount
            found.add(name)
    return found


def plain_qos_class(pod: Mapping[str, Any]) -> str:
    declared = (pod.get("status") or {}).get("qosClass")
    if declared:
        return str(declared)
    spec = pod.get("spec") or {}
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    pod_level = spec.get("resources")
    sources = [pod_level] if pod_level else [
        c.get("resources") or {}
        for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or [])]
    for resources in sources:
        _plain_add(requests, resources.get("requests") or {})
        found = _plain_add(limits, resources.get("limits") or {})
        if (resources.get("limits") or not pod_level) and found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == amount for name, amount in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


QUANTITIES = st.sampled_from(["0", "100m", "0.1", "1", 1, 0, 2.5, "1Gi", "1024Mi", "1e3",
                              "abc", None, ["1"], True, 1.0])
NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu"])
LISTS = st.dictionaries(NAMES, QUANTITIES, max_size=3)
RESOURCES = st.fixed_dictionaries({}, optional={"requests": LISTS, "limits": LISTS})
CONTAINERS = st.lists(st.fixed_dictionaries({}, optional={"resources": RESOURCES}), max_size=3)


@settings(max_examples=500)
@given(containers=CONTAINERS, init=CONTAINERS,
       pod_level=st.one_of(st.none(), RESOURCES),
       declared=st.sampled_from([None, "", "Guaranteed"]))
def test_memoised_qos_class_equals_the_plain_computation(
        containers: list[dict[str, Any]], init: list[dict[str, Any]],
        pod_level: dict[str, Any] | None, declared: str | None) -> None:
    spec: dict[str, Any] = {"containers": containers, "initContainers": init}
    if pod_level is not None:
        spec["resources"] = pod_level
    pod = {"metadata": {"name": "p"}, "spec": spec, "status": {"qosClass": declared}}
    assert qos_class(pod) == plain_qos_class(pod)
    assert qos_class(pod) == plain_qos_class(pod)  # the memo's answer, the second time
