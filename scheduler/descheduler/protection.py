"""Which pods may be evicted at all, and in what order: upstream's DefaultEvictor, as data.

Design: :class:`EvictorSettings` is the DefaultEvictor's arguments (v1alpha2 ``pluginConfig``
``DefaultEvictor`` args, or v1alpha1's top-level ``evictLocalStoragePods`` ... plus per-strategy
``thresholdPriority``/``nodeFit``). :func:`protection_reasons` returns every reason a pod is
protected — the sentences are upstream's, so a summary reads like upstream's logs — and an empty
list when it may go. :func:`eviction_order` is upstream's
``podutil.SortPodsBasedOnPriorityLowToHigh`` (kubernetes-sigs/descheduler
pkg/descheduler/pod/pods.go): lower priority first, and at equal priority BestEffort before
Burstable before Guaranteed. All pure, over raw pod dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from berthmaster.scheduler.model import QuantityError, parse_quantity
from berthmaster.scheduler.pods import (
    annotations_of,
    has_daemonset_owner,
    is_mirror_pod,
    owner_references,
)

# The legacy critical-pod annotation (docs/descheduler.md), and upstream's opt-in/opt-out ones.
CRITICAL_POD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
MANDATORY, PREFERRED = "Mandatory", "Preferred"  # DefaultEvictor noEvictionPolicy values
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # system-cluster-critical; system-node-critical is higher


@dataclass(frozen=True)
class EvictorSettings:
    """DefaultEvictor arguments with upstream's defaults (everything protected).

    The four ``evict_*`` flags and ``ignore_pvc_pods``/``protect_pods_without_pdb``/
    ``protect_resource_claims`` are the effective pod protections, whether the policy gave
    the deprecated booleans or ``podProtections`` (policy.py resolves one into the other as
    upstream's getEffectivePodProtections does).
    """

    evict_local_storage_pods: bool = False
    evict_daemonset_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    evict_failed_bare_pods: bool = False
    node_fit: bool = False
    # priorityThreshold: a value, or a PriorityClass name resolved when the pass starts.
    priority_threshold: int | None = None
    priority_threshold_class: str | None = None
    label_selector: Mapping[str, Any] | None = None
    min_replicas: int = 0
    min_pod_age_seconds: float | None = None
    protect_pods_without_pdb: bool = False
    protect_resource_claims: bool = False
    namespace_label_selector: Mapping[str, Any] | None = None
    no_eviction_policy: str = ""
    # nodeFit's candidate nodes: the Ready nodes this selects (None: every Ready node), as
    # upstream's PreEvictionFilter ReadyNodes(..., args.NodeSelector) - not the policy's
    # top-level nodeSelector
    node_selector: str | None = None
    # podProtections.config.PodsWithPVC.protectedStorageClasses: with PodsWithPVC on, only
    # pods whose claims use one of these classes are kept (empty: every pod with a claim)
    protected_storage_classes: frozenset[str] = frozenset()


def pod_priority(pod: Mapping[str, Any]) -> int | None:
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if value is not None else None


def is_static_pod(pod: Mapping[str, Any]) -> bool:
    source = annotations_of(pod).get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_critical(pod: Mapping[str, Any]) -> bool:
    """The critical-pod annotation, or a priority at or above system-cluster-critical."""
    if CRITICAL_POD_ANNOTATION in annotations_of(pod):
        return True
    priority = pod_priority(pod)
    return priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY


def has_local_storage(pod: Mapping[str, Any]) -> bool:
    return any(
        "emptyDir" in volume or "hostPath" in volume
        for volume in (pod.get("spec") or {}).get("volumes") or []
    )


def has_pvc(pod: Mapping[str, Any]) -> bool:
    return any(
        "persistentVolumeClaim" in volume for volume in (pod.get("spec") or {}).get("volumes") or []
    )


def has_resource_claims(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def prefers_no_eviction(pod: Mapping[str, Any]) -> bool:
    return NO_EVICTION_ANNOTATION in annotations_of(pod)


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def storage_class_protection(pod: Mapping[str, Any], protected: frozenset[str],
                             claim_classes: Mapping[tuple[str, str], str]) -> str | None:
    """defaultevictor.go applyPVCPodsProtection with protectedStorageClasses (and
    podStorageClasses): why a pod with claims is kept, or None. A claim that cannot be read or
    has no class keeps the pod, with upstream's sentence."""
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim is None:
            continue
        if (namespace, claim) not in claim_classes:
            return (f'failed to get persistent volume claim "{namespace}"/"{claim}": '
                    f'persistentvolumeclaim "{claim}" not found')
        storage_class = claim_classes[(namespace, claim)]
        if not storage_class:
            return f'failed to resolve storage class for pod "{namespace}"/"{claim}"'
        if storage_class in protected:
            return f'pod using protected storage class "{storage_class}"'
    return None


def claim_classes_of(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, name) -> spec.storageClassName ("" for none) of listed claims."""
    return {((c.get("metadata") or {}).get("namespace", ""), (c.get("metadata") or {})
             .get("name", "")): str((c.get("spec") or {}).get("storageClassName") or "")
            for c in claims}


def protection_reasons(
    pod: Mapping[str, Any], settings: EvictorSettings, threshold: int | None,
    claim_classes: Mapping[tuple[str, str], str] | None = None,
) -> list[str]:
    """Every reason ``pod`` must not be evicted under ``settings``; empty when it may be.

    ``threshold`` is the resolved priority threshold (a pod at or above it is kept); ``None``
    means system-cluster-critical, upstream's default. ``claim_classes``
    (:func:`claim_classes_of`) is read only with ``protected_storage_classes``.
    """
    if EVICT_ANNOTATION in annotations_of(pod):
        return []
    if settings.no_eviction_policy == MANDATORY and prefers_no_eviction(pod):
        return [f"pod has the {NO_EVICTION_ANNOTATION} annotation and noEvictionPolicy is "
                "Mandatory"]
    reasons = []
    if is_mirror_pod(pod):
        reasons.append("pod is a mirror pod")
    if is_static_pod(pod):
        reasons.append("pod is a static pod")
    if is_terminating(pod):
        reasons.append("pod is terminating")
    if not settings.evict_system_critical_pods:
        if is_critical(pod):
            reasons.append("pod has system critical priority and is protected against eviction")
        else:
            limit = SYSTEM_CRITICAL_PRIORITY if threshold is None else threshold
            priority = pod_priority(pod)
            if priority is not None and priority >= limit:
                reasons.append("pod has higher priority than specified priority class threshold")
    owners = owner_references(pod)
    if not owners:
        if not settings.evict_failed_bare_pods:
            reasons.append("pod does not have any ownerRefs")
        elif phase(pod) != "Failed":
            reasons.append("pod does not have any ownerRefs and is not in failed phase")
    if not settings.evict_local_storage_pods and has_local_storage(pod):
        reasons.append("pod has local storage and is protected against eviction")
    if not settings.evict_daemonset_pods and has_daemonset_owner(pod):
        reasons.append("daemonset pods are protected against eviction")
    if settings.ignore_pvc_pods and has_pvc(pod):
        if not settings.protected_storage_classes:
            reasons.append("pod with PVC is protected against eviction")
        else:
            kept = storage_class_protection(pod, settings.protected_storage_classes,
                                            claim_classes or {})
            if kept:
                reasons.append(kept)
    if settings.protect_resource_claims and has_resource_claims(pod):
        reasons.append("pod has ResourceClaims and descheduler is configured to protect "
                       "ResourceClaims pods")
    return reasons


def qos_class(pod: Mapping[str, Any]) -> str:
    """status.qosClass when the API server set it, else computed as upstream's ComputePodQOS
    (pkg/apis/core/helper/qos): only positive cpu and memory quantities count, summed over the
    containers and init containers (or the pod-level ``spec.resources`` when set); Guaranteed
    needs both limits on every container and requests equal to limits.

    The computation reads only the cpu and memory quantities of each source (and whether it
    has limits at all), so it is memoised on those (:func:`_qos_of_fields`): pods of one owner
    share them, and sorting every node's pods for eviction asks for each pod."""
    declared = (pod.get("status") or {}).get("qosClass")
    if declared:
        return str(declared)
    spec = pod.get("spec") or {}
    pod_level = spec.get("resources")
    sources = [pod_level] if pod_level else [
        c.get("resources") or {}
        for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or [])]
    fields = (bool(pod_level), tuple(_qos_fields(resources) for resources in sources))
    # only strings are memoised: 1, 1.0 and True are one key to a dict, but not one quantity
    if all(type(value) is str or value is None for source in fields[1] for value in source[:4]):
        return _qos_of_fields(fields)
    return _qos_from_fields(*fields)


QosFields = tuple[Any, Any, Any, Any, bool]


def _qos_fields(resources: Mapping[str, Any]) -> QosFields:
    """(requests cpu, requests memory, limits cpu, limits memory, has limits); None: absent."""
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    return (requests.get("cpu"), requests.get("memory"), limits.get("cpu"), limits.get("memory"),
            bool(limits))


@lru_cache(maxsize=4096)
def _qos_of_fields(fields: tuple[bool, tuple[QosFields, ...]]) -> str:
    return _qos_from_fields(*fields)


def _qos_from_fields(pod_level: bool, sources: tuple[QosFields, ...]) -> str:
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for request_cpu, request_memory, limit_cpu, limit_memory, has_limits in sources:
        _add_qos_quantities(requests, request_cpu, request_memory)
        found = _add_qos_quantities(limits, limit_cpu, limit_memory)
        if (has_limits or not pod_level) and found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == amount for name, amount in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _add_qos_quantities(total: dict[str, Fraction], cpu: Any, memory: Any) -> set[str]:
    """Add the positive ones of the cpu/memory quantities (None: absent) to ``total``; their
    names."""
    found = set()
    for name, value in (("cpu", cpu), ("memory", memory)):
        if value is None:
            continue
        try:
            amount = parse_quantity(value)
        except QuantityError:
            continue
        if amount > 0:
            total[name] = total.get(name, Fraction(0)) + amount
            found.add(name)
    return found


QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def eviction_order(pod: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """Sort key: pods without a priority first, then lower priority, then QoS class, then
    pods without the prefer-no-eviction annotation (upstream's
    SortPodsBasedOnPriorityLowToHigh)."""
    priority = pod_priority(pod)
    return (0 if priority is None else 1, priority or 0, QOS_RANK.get(qos_class(pod), 1),
            1 if prefers_no_eviction(pod) else 0)
