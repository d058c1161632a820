"""Pods with ``spec.resourceClaims`` (dynamic resource allocation) are refused.

kube-scheduler 1.35's DynamicResources plugin (``pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go``) allocates devices to a pod's ResourceClaims in Reserve
and PreBind, writing each claim's ``status.allocation`` and ``status.reservedFor`` before the
pod is bound; the kubelet will not start a pod whose claims are not allocated and reserved for
it. berthmaster implements none of that (it watches no ResourceClaims, ResourceSlices or
DeviceClasses), so binding such a pod would leave it unable to start. Such a pod is rejected
before any node is looked at, as an UnschedulableAndUnresolvable PreFilter status (no
preemption can help it), with a message that says what to do: leave the pod to kube-scheduler.

This is the only DRA behaviour: a pod without claims is scheduled as before, and the
FailedScheduling text of a pod without claims keeps DynamicResources' PostFilter sentence
``no new claims to deallocate`` (see ``scheduler/preemption.py``), as kube-scheduler writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berthmaster.scheduler.plugins.base import Status, unresolvable

REFUSED = ("pod has resource claims (spec.resourceClaims) and berthmaster does not allocate "
           "ResourceClaims; schedule it with kube-scheduler (spec.schedulerName: "
           "default-scheduler)")


def refusal(pod: Mapping[str, Any]) -> Status | None:
    """The status rejecting ``pod`` on every node when it has resource claims, else None."""
    if (pod.get("spec") or {}).get("resourceClaims"):
        return unresolvable(REFUSED)
    return None
