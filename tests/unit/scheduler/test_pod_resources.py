"""What a pod requests (scheduler/pod_resources.py), case by case against upstream's rule:

- k8s.io/component-helpers resource/helpers.go: PodRequests (pod-level requests replace the
  container sum for cpu, memory and hugepages-*; overhead added), AggregateContainerRequests
  (sidecars summed, each init container with the sidecars before it, the largest step),
  determineEffectiveRequests and IsPodResizeInfeasible (a running container counts the largest
  of spec, actuated and allocated requests; the spec left out when the resize is Infeasible),
  applyNonMissing (a default only for a missing name);
- pkg/scheduler/framework/types.go: CalculateResource and getNonMissingContainerRequests (the
  node's non-zero totals, ``nonzero_*``);
- pkg/scheduler/framework/plugins/noderesources/resource_allocation.go:
  calculatePodResourceRequest (the pod being scored: NodeResourcesFit's scorers are built
  without the feature gates, fit.go nodeResourceStrategyTypeMap, so pod-level requests and
  container statuses are left out there), and fit.go (Filter's ``Insufficient cpu``;
  isSchedulableAfterPodScaleDown);
- pkg/scheduler/framework/events.go: extractPodScaleDown;
- pkg/apis/core/v1/defaults.go: defaultPodRequests (pod-level requests from pod-level limits).
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import registry
from berthmaster.scheduler.plugins.resource_allocation import (
    DEFAULT_RESOURCES,
    _pod_request,
    allocated,
)
from berthmaster.scheduler.pod_resources import (
    may_fit_after_scale_down,
    pod_requests,
    scaled_down,
    status_resources,
    supported_at_pod_level,
)
from berthmaster.scheduler.quantities import QuantityError
from berthmaster.scheduler.snapshot import Snapshot, placement_view
from tests.support.builders import make_node, make_pod

Mi = 2**20
Gi = 2**30
JSON = dict[str, Any]


def c(name: str, restart: str | None = None, **requests: str) -> JSON:
    """A container requesting ``requests`` (ephemeral_storage -> ephemeral-storage)."""
    container: JSON = {"name": name, "image": "app"}
    if requests:
        container["resources"] = {"requests": {
            k.replace("_", "-"): v for k, v in requests.items()}}
    if restart:
        container["restartPolicy"] = restart
    return container


def pod(containers: list[JSON], *, init: list[JSON] | None = None,
        pod_level: JSON | None = None, overhead: JSON | None = None,
        statuses: list[JSON] | None = None, init_statuses: list[JSON] | None = None,
        conditions: list[JSON] | None = None, node: str | None = None,
        uid: str = "uid-p") -> JSON:
    """make_pod with these containers (and init containers, pod-level resources, overhead) and,
    for a running pod, the container statuses and conditions a kubelet reports."""
    extra = {"initContainers": init, "resources": pod_level, "overhead": overhead}
    raw = make_pod("p", "ns", uid=uid, node_name=node, spec={
        "containers": containers, **{k: v for k, v in extra.items() if v is not None}})
    reported = {"containerStatuses": statuses, "initContainerStatuses": init_statuses,
                "conditions": conditions}
    raw["status"].update({k: v for k, v in reported.items() if v})
    return raw


def running(name: str, actuated: JSON, allocated_: JSON | None = None) -> JSON:
    """A container status as the kubelet reports it (actuated requests, allocated ones)."""
    cs: JSON = {"name": name, "resources": {"requests": actuated}}
    if allocated_ is not None:
        cs["allocatedResources"] = allocated_
    return cs


def pending(reason: str) -> list[JSON]:
    return [{"type": "PodResizePending", "status": "True", "reason": reason}]


# (id, pod, requests, (nonzero cpu, nonzero memory), (cpu, memory) NodeResourcesFit's score adds
# for the pod being placed: its containers only, no status)
CASES = [
    ("no requests: the non-zero defaults",
     pod([c("a")]), {}, (100, 200 * Mi), (100, 200 * Mi)),
    ("a request written as 0 stays 0 (only missing names get defaults)",
     pod([c("a", cpu="0")]), {"cpu": 0}, (0, 200 * Mi), (0, 200 * Mi)),
    # pod-level requests only
    ("pod-level requests only",
     pod([c("a"), c("b")], pod_level={"requests": {"cpu": "2", "memory": "1Gi"}}),
     {"cpu": 2000, "memory": Gi}, (2000, Gi), (200, 400 * Mi)),
    ("pod-level cpu only: memory defaults per container",
     pod([c("a"), c("b")], pod_level={"requests": {"cpu": "1"}}),
     {"cpu": 1000}, (1000, 400 * Mi), (200, 400 * Mi)),
    ("pod-level limits default the requests (no container requests)",
     pod([c("a")], pod_level={"limits": {"cpu": "2", "memory": "1Gi"}}),
     {"cpu": 2000, "memory": Gi}, (2000, Gi), (100, 200 * Mi)),
    ("pod-level limits default cpu from the containers, memory from the limit",
     pod([c("a", cpu="500m")], pod_level={"limits": {"cpu": "2", "memory": "1Gi"}}),
     {"cpu": 500, "memory": Gi}, (500, Gi), (500, 200 * Mi)),
    ("a resource not supported at pod level keeps the container sum",
     pod([c("a", cpu="300m", ephemeral_storage="1Gi")],
         pod_level={"requests": {"cpu": "1"}}),
     {"cpu": 1000, "ephemeral-storage": Gi}, (1000, 200 * Mi), (300, 200 * Mi)),
    # mixed with container requests
    ("pod-level cpu over container cpu; memory named by one container",
     pod([c("a", cpu="300m", memory="100Mi"), c("b", cpu="200m", ephemeral_storage="1Gi")],
         pod_level={"requests": {"cpu": "1"}}),
     {"cpu": 1000, "memory": 100 * Mi, "ephemeral-storage": Gi},
     # the node counts memory as requested (the pod names it); the scorer gives b 200Mi and
     # leaves the pod-level cpu out
     (1000, 100 * Mi), (500, 300 * Mi)),
    ("pod-level cpu, container memory",
     pod([c("a", memory="256Mi"), c("b")], pod_level={"requests": {"cpu": "1"}}),
     {"cpu": 1000, "memory": 256 * Mi}, (1000, 256 * Mi), (200, 456 * Mi)),
    # overhead
    ("overhead added to pod-level requests",
     pod([c("a")], pod_level={"requests": {"cpu": "1", "memory": "1Gi"}},
         overhead={"cpu": "250m", "memory": "64Mi"}),
     {"cpu": 1250, "memory": Gi + 64 * Mi}, (1250, Gi + 64 * Mi), (350, 264 * Mi)),
    ("overhead added to the non-zero defaults",
     pod([c("a")], overhead={"cpu": "250m", "memory": "64Mi"}),
     {"cpu": 250, "memory": 64 * Mi}, (350, 264 * Mi), (350, 264 * Mi)),
    # init and sidecar containers
    ("init and sidecar containers, no pod-level",
     pod([c("a")], init=[c("s", "Always", cpu="200m"), c("i", memory="1Gi")]),
     {"cpu": 200, "memory": Gi}, (300, Gi + 200 * Mi), (300, Gi + 200 * Mi)),
    ("init and sidecar containers under pod-level memory",
     pod([c("a", cpu="500m")],
         init=[c("s", "Always", cpu="200m", memory="100Mi"), c("i", cpu="1", memory="3Gi")],
         pod_level={"requests": {"memory": "2Gi"}}),
     {"cpu": 1200, "memory": 2 * Gi}, (1200, 2 * Gi), (1200, 3 * Gi + 100 * Mi)),
    ("a sidecar after the init container does not add to its step",
     pod([c("a", cpu="100m")], init=[c("i", cpu="1"), c("s", "Always", cpu="300m")]),
     {"cpu": 1000}, (1000, 400 * Mi), (1000, 400 * Mi)),
    # resized pods
    ("resized up: status larger than spec counts",
     pod([c("a", cpu="500m", memory="256Mi")],
         statuses=[running("a", {"cpu": "1", "memory": "256Mi"}, {"cpu": "1"})]),
     {"cpu": 1000, "memory": 256 * Mi}, (1000, 256 * Mi), (500, 256 * Mi)),
    ("resize pending: spec larger than status counts",
     pod([c("a", cpu="2")], statuses=[running("a", {"cpu": "1"}, {"cpu": "1"})]),
     {"cpu": 2000}, (2000, 200 * Mi), (2000, 200 * Mi)),
    ("resize deferred: the spec still counts",
     pod([c("a", cpu="2")], statuses=[running("a", {"cpu": "1"}, {"cpu": "1"})],
         conditions=pending("Deferred")),
     {"cpu": 2000}, (2000, 200 * Mi), (2000, 200 * Mi)),
    ("resize infeasible: the spec is left out",
     pod([c("a", cpu="2")], statuses=[running("a", {"cpu": "1"}, {"cpu": "1"})],
         conditions=pending("Infeasible")),
     {"cpu": 1000}, (1000, 200 * Mi), (2000, 200 * Mi)),
    ("resize in progress: allocated larger than actuated counts",
     pod([c("a", cpu="1")], statuses=[running("a", {"cpu": "1"}, {"cpu": "2"})],
         conditions=[{"type": "PodResizeInProgress", "status": "True"}]),
     {"cpu": 2000}, (2000, 200 * Mi), (1000, 200 * Mi)),
    ("a resource only the status names is requested",
     pod([c("a", cpu="1")], statuses=[running("a", {"cpu": "1", "memory": "64Mi"})]),
     {"cpu": 1000, "memory": 64 * Mi}, (1000, 64 * Mi), (1000, 200 * Mi)),
    ("a status without resources: the spec",
     pod([c("a", cpu="1")], statuses=[{"name": "a", "ready": True}]),
     {"cpu": 1000}, (1000, 200 * Mi), (1000, 200 * Mi)),
    ("an ordinary init container's status is not read",
     pod([c("a", cpu="100m")], init=[c("i", cpu="1")],
         init_statuses=[running("i", {"cpu": "3"}, {"cpu": "3"})]),
     {"cpu": 1000}, (1000, 200 * Mi), (1000, 200 * Mi)),
    ("a sidecar's status is read",
     pod([c("a", cpu="100m")], init=[c("s", "Always", cpu="200m")],
         init_statuses=[running("s", {"cpu": "1"}, {"cpu": "1"})]),
     {"cpu": 1100}, (1100, 400 * Mi), (300, 400 * Mi)),
    ("pod-level requests win over a resized container (pod-level status not read)",
     pod([c("a", cpu="500m")], pod_level={"requests": {"cpu": "1"}},
         statuses=[running("a", {"cpu": "3"}, {"cpu": "3"})]),
     {"cpu": 1000}, (1000, 200 * Mi), (500, 200 * Mi)),
]


@pytest.mark.parametrize(("raw", "requests", "nonzero", "scored"),
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_pod_requests(raw: JSON, requests: dict[str, int], nonzero: tuple[int, int],
                      scored: tuple[int, int]) -> None:
    got = pod_requests(raw)
    assert got.requests == requests
    assert (got.nonzero_cpu, got.nonzero_memory) == nonzero
    view = PodView.from_dict(raw)
    assert tuple(_pod_request(view, name, nonzero=True) for name in ("cpu", "memory")) == scored


def test_a_plain_pod_is_scored_as_counted() -> None:
    """No pod-level requests, no container status with resources: no second figure kept."""
    assert pod_requests(pod([c("a", cpu="1")], init=[c("i", memory="1Gi")])).scored is None
    assert pod_requests(pod([c("a")], pod_level={"requests": {"cpu": "1"}})).scored == {
        "cpu": 100, "memory": 200 * Mi}


@pytest.mark.parametrize(("name", "supported"), [
    ("cpu", True), ("memory", True), ("hugepages-2Mi", True), ("ephemeral-storage", False),
    ("example.com/gpu", False)])
def test_supported_at_pod_level(name: str, supported: bool) -> None:
    assert supported_at_pod_level(name) is supported


def test_a_bad_status_quantity_names_the_field() -> None:
    raw = pod([c("a", cpu="1")], statuses=[running("a", {"cpu": "lots"})])
    with pytest.raises(QuantityError, match=r"^pod ns/p: status\.containerStatuses\[0\]"
                                            r"\.resources\.requests\.cpu: invalid quantity"):
        pod_requests(raw, "pod ns/p: spec")


def test_a_bad_pod_level_quantity_names_the_field() -> None:
    raw = pod([c("a")], pod_level={"requests": {"memory": "big"}})
    with pytest.raises(QuantityError, match=r"^pod ns/p: spec\.resources\.requests\.memory"):
        pod_requests(raw, "pod ns/p: spec")


# -- NodeResourcesFit: Filter reasons and node totals -------------------------------------------

def _fit(incoming: JSON, existing: list[JSON], cpu: str = "2") -> tuple[str, ...] | None:
    node = make_node("n", cpu=cpu, memory="4Gi")
    snap = Snapshot.build(nodes=[node], pods=existing)
    result = registry.PREDICATES["PodFitsResources"]().prefilter(PodView.from_dict(incoming),
                                                                  snap)
    if result is None or not callable(result):
        return None if result is None else result.reasons
    status = result(snap.node("n"))
    return None if status is None else status.reasons


@pytest.mark.parametrize(("incoming", "existing", "reasons"), [
    pytest.param(pod([c("a", cpu="100m")], pod_level={"requests": {"cpu": "3"}}), [],
                 ("Insufficient cpu",), id="pod-level request larger than the node"),
    pytest.param(pod([c("a", cpu="3")], pod_level={"requests": {"cpu": "1"}}), [], None,
                 id="pod-level request smaller than the containers' fits"),
    pytest.param(pod([c("a", cpu="1")]),
                 [pod([c("o", cpu="500m")], node="n", uid="o",
                      statuses=[running("o", {"cpu": "1500m"}, {"cpu": "1500m"})])],
                 ("Insufficient cpu",), id="a bound pod resized up takes its status"),
    pytest.param(pod([c("a", cpu="1")]),
                 [pod([c("o", cpu="1")], node="n", uid="o",
                      statuses=[running("o", {"cpu": "1500m"}, {"cpu": "1500m"})],
                      conditions=pending("Infeasible"))],
                 ("Insufficient cpu",), id="an infeasible resize keeps the actuated requests"),
    pytest.param(pod([c("a", cpu="1")]),
                 [pod([c("o", cpu="1")], node="n", uid="o",
                      statuses=[running("o", {"cpu": "500m"}, {"cpu": "500m"})])],
                 None, id="a resize up not yet actuated counts its spec"),
])
def test_node_resources_fit(incoming: JSON, existing: list[JSON],
                            reasons: tuple[str, ...] | None) -> None:
    assert _fit(incoming, existing) == reasons


def test_node_totals_and_scores_read_the_right_figures() -> None:
    """The node sums ``nonzero_*`` of its pods (types.go, CalculateResource); the pod being
    scored adds its containers' non-zero requests, pod-level ones left out (fit.go,
    nodeResourceStrategyTypeMap builds the scorers without enablePodLevelResources;
    resource_allocation.go, calculatePodResourceRequest), while BalancedAllocation
    (``nonzero=False``) counts the pod-level cpu."""
    bound = pod([c("o", memory="256Mi"), c("p")], pod_level={"requests": {"cpu": "1"}},
                node="n", uid="o")
    snap = Snapshot.build(nodes=[make_node("n", cpu="4", memory="4Gi")], pods=[bound])
    info = snap.node("n")
    assert (info.nonzero_cpu, info.nonzero_memory) == (1000, 256 * Mi)
    assert (info.req_cpu, info.req_memory) == (1000, 256 * Mi)
    incoming = PodView.from_dict(pod([c("a", memory="256Mi"), c("b")],
                                     pod_level={"requests": {"cpu": "1"}}, uid="in"))
    assert allocated(incoming, info, DEFAULT_RESOURCES, nonzero=True) == [
        (1200, 4000, 1), (256 * Mi + 456 * Mi, 4 * Gi, 1)]
    assert allocated(incoming, info, DEFAULT_RESOURCES, nonzero=False) == [
        (2000, 4000, 1), (512 * Mi, 4 * Gi, 1)]


# -- resize events -------------------------------------------------------------------------------

BIG = pod([c("o", cpu="2", memory="1Gi")], node="n", uid="o",
          statuses=[running("o", {"cpu": "2", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"})])
CPU_DOWN = pod([c("o", cpu="1", memory="1Gi")], node="n", uid="o",
               statuses=[running("o", {"cpu": "1", "memory": "1Gi"},
                                 {"cpu": "1", "memory": "1Gi"})])
CPU_DOWN_PENDING = pod([c("o", cpu="1", memory="1Gi")], node="n", uid="o",
                       statuses=[running("o", {"cpu": "2", "memory": "1Gi"},
                                         {"cpu": "2", "memory": "1Gi"})])
MEMORY_DOWN = pod([c("o", cpu="2", memory="512Mi")], node="n", uid="o",
                  statuses=[running("o", {"cpu": "2", "memory": "512Mi"},
                                    {"cpu": "2", "memory": "512Mi"})])


@pytest.mark.parametrize(("old", "new", "down"), [
    pytest.param(BIG, CPU_DOWN, True, id="cpu given back"),
    pytest.param(BIG, CPU_DOWN_PENDING, False, id="spec down, status not yet: still counted"),
    pytest.param(CPU_DOWN_PENDING, CPU_DOWN, True, id="the kubelet finished the resize"),
    pytest.param(CPU_DOWN, BIG, False, id="scaled up"),
])
def test_scaled_down(old: JSON, new: JSON, down: bool) -> None:
    assert scaled_down(old, new) is down


@pytest.mark.parametrize(("target", "old", "new", "helps"), [
    pytest.param(pod([c("a", cpu="1")], uid="t"), BIG, CPU_DOWN, True,
                 id="cpu freed, cpu wanted"),
    pytest.param(pod([c("a", cpu="1")], uid="t"), BIG, MEMORY_DOWN, False,
                 id="memory freed, only cpu wanted"),
    pytest.param(pod([c("a", cpu="1")], uid="o"), BIG, MEMORY_DOWN, True,
                 id="the target itself"),
    pytest.param(pod([c("a", cpu="1")], uid="t"), {**BIG, "spec": {**BIG["spec"],
                                                                    "nodeName": ""}},
                 {**CPU_DOWN, "spec": {**CPU_DOWN["spec"], "nodeName": ""}}, False,
                 id="an unscheduled pod frees nothing"),
])
def test_may_fit_after_scale_down(target: JSON, old: JSON, new: JSON, helps: bool) -> None:
    assert may_fit_after_scale_down(target, old, new) is helps


def test_status_resources_are_part_of_the_placement_view() -> None:
    """A status update that only resizes must reach the snapshot (the cache skips updates
    whose placement view did not move)."""
    assert placement_view(BIG) != placement_view(CPU_DOWN | {"spec": BIG["spec"]})
    churn = {**BIG, "status": {**BIG["status"], "podIP": "10.0.0.1",
                               "conditions": [{"type": "Ready", "status": "True"}]}}
    assert placement_view(BIG) == placement_view(churn)
    assert status_resources(pod([c("a")], conditions=pending("Infeasible"))) == (
        (), (), ({"type": "PodResizePending", "status": "True", "reason": "Infeasible"},))
