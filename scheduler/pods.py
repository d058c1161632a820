"""What a raw pod dict says about itself, asked by the drain, the autoscaler and the descheduler.

Pure, over pods as the API serves them. One definition of each fact:

- a pod's ``namespace/name`` (the form kubectl and upstream's logs print) is
  :func:`berthmaster.foundation.keys.key_of`, as for every object (the snapshot's
  :func:`berthmaster.scheduler.snapshot.pod_key` is a different thing: the uid);
- :func:`is_mirror_pod` is the kubelet's ``kubernetes.io/config.mirror`` annotation
  (k8s.io/kubernetes pkg/kubelet/types ``ConfigMirrorAnnotationKey``);
- a DaemonSet pod has two upstream definitions, and each caller keeps its upstream's:
  :func:`is_daemonset_pod` asks the *controller* owner reference (``metav1.GetControllerOf``),
  as kubectl drain's ``daemonSetFilter`` (k8s.io/kubectl pkg/drain/filters.go) and
  cluster-autoscaler's ``pod.IsDaemonSetPod`` do; :func:`has_daemonset_owner` asks *any* owner
  reference, as the descheduler's ``utils.IsDaemonsetPod`` (pkg/utils/pod.go) does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET = "DaemonSet"


def annotations_of(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


def owner_references(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("metadata") or {}).get("ownerReferences") or [])


def controller_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true`` (``metav1.GetControllerOf``), if any."""
    return next((ref for ref in owner_references(pod) if ref.get("controller")), None)


def controller_kind(pod: Mapping[str, Any]) -> str | None:
    controller = controller_of(pod)
    return None if controller is None else str(controller.get("kind"))


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    return MIRROR_ANNOTATION in annotations_of(pod)


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """The pod's controller is a DaemonSet (kubectl drain, cluster-autoscaler)."""
    return controller_kind(pod) == DAEMONSET


def has_daemonset_owner(pod: Mapping[str, Any]) -> bool:
    """Any owner reference is a DaemonSet, controller or not (the descheduler)."""
    return any(ref.get("kind") == DAEMONSET for ref in owner_references(pod))
