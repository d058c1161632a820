"""What a pod requests, as kube-scheduler 1.35 counts it: the one rule every part of berthmaster
uses (the scheduler's filters, scores and node totals, the descheduler, the autoscaler).

Upstream: k8s.io/component-helpers resource/helpers.go (``PodRequests``,
``AggregateContainerRequests``, ``determineEffectiveRequests``), read by
pkg/scheduler/framework/types.go (``PodInfo.CalculateResource``) for the pods counted on a node
and by pkg/scheduler/framework/plugins/noderesources/ (fit.go ``computePodResourceRequest``,
resource_allocation.go ``calculatePodResourceRequest``) for the pod being placed. With 1.35's
default feature gates (pkg/features/kube_features.go): PodLevelResources on (beta),
InPlacePodVerticalScaling on (GA), InPlacePodLevelResourcesVerticalScaling off (alpha).

The rule, in order:

1. **Containers.** App containers and restartable init containers (sidecars:
   ``restartPolicy: Always``) are summed; each ordinary init container needs itself plus the
   sidecars started before it, and the pod needs at least the largest such step.
2. **Resize.** A container with a status carrying ``resources`` (a running pod) counts the
   largest of its spec requests, its actuated ``status.containerStatuses[].resources.requests``
   and its ``allocatedResources``: a resize in either direction is counted at its larger end
   until the kubelet has finished it. When the pod's ``PodResizePending`` condition says
   ``Infeasible`` the spec is left out (the kubelet will never apply it). Ordinary init
   containers always count their spec. Pod-level status resources are not read (their gate is
   off in 1.35).
3. **Pod-level resources.** ``spec.resources.requests`` of cpu, memory and ``hugepages-*``
   replace the container sum for each resource they name; other resources keep the sum.
4. **Overhead.** ``spec.overhead`` (from the RuntimeClass) is added.

The *non-zero* requests used by NodeResourcesFit's scores give a container that does not name
a cpu or memory request 100m / 200Mi (a request written as 0 stays 0: upstream's
``NonMissingContainerRequests`` fills only missing names). Two figures come from them:

- ``nonzero_cpu`` / ``nonzero_memory`` (``CalculateResource``'s Non0CPU/Non0Mem, summed into
  the node's ``NonZeroRequested``): for a pod with pod-level requests, the defaults apply only
  to a resource the pod's total requests do not name at all;
- ``scored``, what NodeResourcesFit's score adds for the pod being placed
  (``calculatePodResourceRequest`` with ``useRequested`` false). Its scorers are built without
  the feature gates (fit.go, nodeResourceStrategyTypeMap: ``enablePodLevelResources`` and
  ``enableInPlacePodVerticalScaling`` stay false, unlike BalancedAllocation's), so it is the
  containers' sum with the defaults and the overhead, pod-level requests and container
  statuses left out. None when that is what the pod counts for (no pod-level requests, no
  container status with resources): cpu and memory are then ``nonzero_*``, the rest
  ``requests``.

Objects read from files may not have been through the API server's defaulting
(pkg/apis/core/v1/defaults.go, ``SetDefaults_Pod``), so a container's missing request
defaults to its limit, and pod-level requests default as ``defaultPodRequests`` does when
pod-level limits are set. Pod-level hugepage limits derived from container limits
(``defaultHugePagePodLimits``) are not reproduced: only the API server's result is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.scheduler.quantities import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    QuantityError,
    resource_list,
)

Obj = Mapping[str, Any]
Amounts = dict[str, int]

HUGEPAGES_PREFIX = "hugepages-"
# resource/helpers.go, supportedPodLevelResources (plus the hugepages- prefix)
POD_LEVEL_RESOURCES = frozenset((CPU, MEMORY))
# api/core/v1/types.go: the condition whose Infeasible reason drops a pending resize
POD_RESIZE_PENDING = "PodResizePending"
POD_RESIZE_IN_PROGRESS = "PodResizeInProgress"
REASON_INFEASIBLE = "Infeasible"
# what the request rule reads of a container status
STATUS_FIELDS = ("name", "resources", "allocatedResources")
NON_ZERO_DEFAULTS: Mapping[str, int] = {CPU: DEFAULT_MILLI_CPU_REQUEST,
                                        MEMORY: DEFAULT_MEMORY_REQUEST}
_NO_DEFAULTS: Mapping[str, int] = {}


@dataclass(frozen=True, slots=True)
class PodRequests:
    """One pod's requests (see the module docstring for each figure's rule)."""

    requests: Amounts
    nonzero_cpu: int
    nonzero_memory: int
    scored: Amounts | None = None


def supported_at_pod_level(name: str) -> bool:
    """resource/helpers.go, IsSupportedPodLevelResource."""
    return name in POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def _add(into: Amounts, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: Amounts, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if k not in into or v > into[k]:
            into[k] = v


def container_requests(container: Obj, where: str) -> Amounts:
    """A container's spec requests, a missing one defaulted to its limit (SetDefaults_Pod)."""
    res = container.get("resources") or {}
    requests = resource_list(res.get("requests"), f"{where}.resources.requests")
    limits = res.get("limits")
    if limits:
        for name, amount in resource_list(limits, f"{where}.resources.limits").items():
            requests.setdefault(name, amount)
    return requests


def resize_infeasible(pod: Obj) -> bool:
    """resource/helpers.go, IsPodResizeInfeasible: the first PodResizePending condition says
    Infeasible."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == POD_RESIZE_PENDING:
            return bool(condition.get("reason") == REASON_INFEASIBLE)
    return False


def _statuses(pod: Obj) -> dict[str, tuple[str, Obj]]:
    """Container name -> (its status's field path, the status), for the statuses that report
    resources."""
    status = pod.get("status") or {}
    found: dict[str, tuple[str, Obj]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for i, cs in enumerate(status.get(key) or ()):
            if cs.get("resources") is not None:
                found[str(cs.get("name", ""))] = (f"status.{key}[{i}]", cs)
    return found


def effective_requests(spec: Mapping[str, int], actuated: Mapping[str, int],
                       allocated: Mapping[str, int], infeasible: bool) -> Amounts:
    """resource/helpers.go, determineEffectiveRequests: the larger of each resource over the
    spec, the actuated and the allocated requests (the spec left out when the resize is
    infeasible); a name any of them holds is held by the result."""
    out: Amounts = {} if infeasible else dict(spec)
    _max(out, actuated)
    _max(out, allocated)
    return out


def _with_status(container: Obj, requests: Amounts, statuses: Mapping[str, tuple[str, Obj]],
                 infeasible: bool, where: str) -> Amounts:
    found = statuses.get(str(container.get("name", "")))
    if found is None:
        return requests
    path, cs = found
    at = f"{where.removesuffix('spec')}{path}"
    actuated = resource_list((cs.get("resources") or {}).get("requests"),
                             f"{at}.resources.requests")
    allocated = resource_list(cs.get("allocatedResources"), f"{at}.allocatedResources")
    return effective_requests(requests, actuated, allocated, infeasible)


def _non_missing(requests: Amounts, defaults: Mapping[str, int]) -> Amounts:
    """resource/helpers.go, applyNonMissing: a default for each name the container lacks."""
    if not defaults or all(k in requests for k in defaults):
        return requests
    out = dict(requests)
    for k, v in defaults.items():
        out.setdefault(k, v)
    return out


def aggregate_container_requests(pod: Obj, defaults: Mapping[str, int] = _NO_DEFAULTS,
                                 use_status: bool = True, where: str = "spec") -> Amounts:
    """resource/helpers.go, AggregateContainerRequests (``UseStatusResources`` as
    ``use_status``, ``NonMissingContainerRequests`` as ``defaults``)."""
    spec = pod.get("spec") or {}
    statuses = _statuses(pod) if use_status else {}
    infeasible = bool(statuses) and resize_infeasible(pod)
    total: Amounts = {}
    for i, c in enumerate(spec.get("containers") or ()):
        at = f"{where}.containers[{i}]"
        r = _with_status(c, container_requests(c, at), statuses, infeasible, where)
        _add(total, _non_missing(r, defaults))
    sidecars: Amounts = {}
    init_max: Amounts = {}
    for i, c in enumerate(spec.get("initContainers") or ()):
        at = f"{where}.initContainers[{i}]"
        r = container_requests(c, at)
        if c.get("restartPolicy") == "Always":
            r = _non_missing(_with_status(c, r, statuses, infeasible, where), defaults)
            _add(total, r)
            _add(sidecars, r)
            _max(init_max, sidecars)
        else:
            step = dict(_non_missing(r, defaults))
            _add(step, sidecars)
            _max(init_max, step)
    _max(total, init_max)
    return total


def pod_level_requests(pod: Obj, where: str = "spec") -> Amounts:
    """``spec.resources.requests`` of the resources supported at pod level, defaulted as the API
    server does when pod-level limits are set (defaults.go, defaultPodRequests): from the
    containers' aggregated requests, else from the pod-level limit. Empty: not set."""
    spec = pod.get("spec") or {}
    res = spec.get("resources") or {}
    requests = resource_list(res.get("requests"), f"{where}.resources.requests")
    limits = res.get("limits")
    if limits:
        limit_amounts = resource_list(limits, f"{where}.resources.limits")
        aggregated = aggregate_container_requests(pod, use_status=False, where=where)
        for name, amount in aggregated.items():
            if name in POD_LEVEL_RESOURCES:  # supported and overcommittable: not hugepages
                requests.setdefault(name, amount)
        for name, amount in limit_amounts.items():
            if supported_at_pod_level(name):
                requests.setdefault(name, amount)
    return {k: v for k, v in requests.items() if supported_at_pod_level(k)}


def _total(pod: Obj, pod_level: Mapping[str, int], overhead: Mapping[str, int],
           defaults: Mapping[str, int], where: str, use_status: bool = True) -> Amounts:
    """resource/helpers.go, PodRequests: containers, then pod-level values, then overhead."""
    total = aggregate_container_requests(pod, defaults, use_status, where)
    total.update(pod_level)
    _add(total, overhead)
    return total


def _plain(containers: Iterable[Obj]) -> PodRequests | None:
    """pod_requests of a pod of app containers alone with no status resources, pod-level
    requests or overhead (most pods), in one pass; None when a quantity is bad (the general
    walk then names the container)."""
    total: Amounts = {}
    cpu = memory = 0
    try:
        for c in containers:
            res = c.get("resources") or {}
            requests = resource_list(res.get("requests"))
            limits = res.get("limits")
            if limits:
                for name, amount in resource_list(limits).items():
                    requests.setdefault(name, amount)
            for name, amount in requests.items():
                total[name] = total.get(name, 0) + amount
            cpu += requests.get(CPU, DEFAULT_MILLI_CPU_REQUEST)
            memory += requests.get(MEMORY, DEFAULT_MEMORY_REQUEST)
    except QuantityError:
        return None
    return PodRequests(total, cpu, memory)


def _plain_shape(pod: Obj, spec: Obj) -> bool:
    return (not spec.get("initContainers") and not spec.get("overhead")
            and not spec.get("resources") and not _statuses(pod))


def pod_requests(pod: Obj, where: str = "spec") -> PodRequests:
    """The pod's requests and non-zero requests (see the module docstring); ``where`` prefixes
    the field named in a quantity error (``pod ns/name: spec``)."""
    spec = pod.get("spec") or {}
    if _plain_shape(pod, spec):
        plain = _plain(spec.get("containers") or ())
        if plain is not None:
            return plain
    return general_pod_requests(pod, where)


def general_pod_requests(pod: Obj, where: str = "spec") -> PodRequests:
    """:func:`pod_requests` by the whole rule, for every pod (``pod_requests`` takes a one-pass
    shortcut for a pod of app containers alone)."""
    spec = pod.get("spec") or {}
    pod_level = pod_level_requests(pod, where)
    overhead = resource_list(spec.get("overhead"), f"{where}.overhead")
    requests = _total(pod, pod_level, overhead, _NO_DEFAULTS, where)
    # types.go, getNonMissingContainerRequests
    missing = NON_ZERO_DEFAULTS if not pod_level else {
        k: v for k, v in NON_ZERO_DEFAULTS.items() if k not in requests}
    nonzero = _total(pod, pod_level, overhead, missing, where) if missing else requests
    scored = None
    if pod_level or _statuses(pod):
        scored = _total(pod, {}, overhead, NON_ZERO_DEFAULTS, where, use_status=False)
    return PodRequests(requests, nonzero.get(CPU, 0), nonzero.get(MEMORY, 0), scored)


def status_resources(pod: Obj) -> tuple[Any, ...]:
    """The parts of a pod's status its requests depend on (each container status's name,
    resources and allocatedResources; the resize conditions), for the scheduler's cache to
    keep and to compare."""
    status = pod.get("status") or {}
    statuses = tuple(
        tuple({k: cs[k] for k in STATUS_FIELDS if k in cs} for cs in status.get(key) or ()
              if isinstance(cs, Mapping) and cs.get("resources") is not None)
        for key in ("containerStatuses", "initContainerStatuses"))
    conditions = tuple(resize_conditions(status.get("conditions")))
    return (*statuses, conditions)


def resize_conditions(conditions: Any) -> list[dict[str, Any]]:
    """The PodResizePending / PodResizeInProgress conditions, reduced to type, status and
    reason."""
    if not isinstance(conditions, list):
        return []
    return [{k: c.get(k) for k in ("type", "status", "reason")} for c in conditions
            if isinstance(c, Mapping)
            and c.get("type") in (POD_RESIZE_PENDING, POD_RESIZE_IN_PROGRESS)]


def scaled_down(old: Obj, new: Obj) -> bool:
    """pkg/scheduler/framework/events.go, extractPodScaleDown: some resource ``old`` requested
    is no longer requested by ``new``, or less of it (an UpdatePodScaleDown event)."""
    try:
        before, after = pod_requests(old).requests, pod_requests(new).requests
    except QuantityError:
        return False
    return any(name not in after or after[name] < amount for name, amount in before.items())


def may_fit_after_scale_down(target: Obj, old: Obj, new: Obj) -> bool:
    """noderesources/fit.go, isSchedulableAfterPodScaleDown: ``new`` (an update of ``old``) is
    the target itself, or a bound pod now requesting less of something the target requests."""
    target_uid = (target.get("metadata") or {}).get("uid")
    if target_uid and target_uid == (new.get("metadata") or {}).get("uid"):
        return True
    if not (new.get("spec") or {}).get("nodeName"):
        return False
    try:
        wanted = pod_requests(target).requests
        before, after = pod_requests(old).requests, pod_requests(new).requests
    except QuantityError:
        return True  # unknown: err on retrying
    return any(amount != 0 and before.get(name, 0) > after.get(name, 0)
               for name, amount in wanted.items())
