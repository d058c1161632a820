"""PodNodeConstraints (OpenShift), as pure decisions.

OpenShift (origin pkg/scheduler/admission/podnodeconstraints/admission.go, ``Admit``/
``admitPodSpec``/``checkPodsBindAccess``/``isNodeSelfTargetWithMirrorPod``): a request whose
pod spec sets ``nodeName``, or a ``nodeSelector`` label on ``nodeSelectorLabelBlacklist``, is
refused unless the requesting user may create ``pods/binding`` in the namespace (for a pod, on
that pod's name). It covers pods (create only) and the pod templates of the workload kinds
(create and update): PodTemplates, ReplicationControllers, Deployments, ReplicaSets,
StatefulSets, Jobs, CronJobs and DeploymentConfigs; DaemonSets are ignored on purpose (their
pods are placed per node). A node creating a mirror pod bound to itself is always allowed, and
so are kube-controller-manager's controllers creating pods from templates (:func:`is_controller`).

The access check needs the API server (a SubjectAccessReview, access.py); this module says
which labels matter and words the refusal, so the check is asked only when it can matter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.pods import is_mirror_pod

NAME = "PodNodeConstraints"
DEFAULT_BLACKLIST = ("kubernetes.io/hostname",)
NODE_NAME_REFUSAL = "node selection by nodeName is prohibited by policy for your role"
LABELS_REFUSAL = "node selection by label(s) {labels} is prohibited by policy for your role"
BOTH_REFUSAL = ("node selection by nodeName and label(s) {labels} is prohibited by policy for "
                "your role")
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
# kube-controller-manager's identities: they create the pods of templates checked above.
CONTROLLER_USER_PREFIX = "system:serviceaccount:kube-system:"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"

# (group, resource) -> the path of the pod spec inside the object.
POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("spec",),
    ("", "podtemplates"): ("template", "spec"),
    ("", "replicationcontrollers"): ("spec", "template", "spec"),
    ("apps", "deployments"): ("spec", "template", "spec"),
    ("apps", "replicasets"): ("spec", "template", "spec"),
    ("apps", "statefulsets"): ("spec", "template", "spec"),
    ("batch", "jobs"): ("spec", "template", "spec"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template", "spec"),
    ("apps.openshift.io", "deploymentconfigs"): ("spec", "template", "spec"),
}


@dataclass(frozen=True)
class Settings:
    """``PodNodeConstraintsConfig``; ``enabled`` is False when the plugin is not configured
    (OpenShift then disables it)."""

    enabled: bool = False
    blacklist: Sequence[str] = field(default_factory=lambda: list(DEFAULT_BLACKLIST))


def pod_spec(obj: Mapping[str, Any], group: str, resource: str) -> Mapping[str, Any] | None:
    """The pod spec the rule looks at, or None for a kind it does not cover."""
    path = POD_SPEC_PATHS.get((group, resource))
    if path is None:
        return None
    node: Any = obj
    for step in path:
        node = node.get(step) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def applies(group: str, resource: str, subresource: str, operation: str) -> bool:
    """Pods on create only; the covered templates on create and update; no subresource."""
    if subresource or (group, resource) not in POD_SPEC_PATHS:
        return False
    if (group, resource) == ("", "pods"):
        return operation == "CREATE"
    return operation in ("CREATE", "UPDATE")


def blacklisted_labels(spec: Mapping[str, Any], blacklist: Sequence[str]) -> list[str]:
    """The pod spec's nodeSelector keys on the blacklist, sorted (Go's map order is random)."""
    banned = set(blacklist)
    return sorted(key for key in (spec.get("nodeSelector") or {}) if key in banned)


def needs_access_check(spec: Mapping[str, Any], blacklist: Sequence[str]) -> bool:
    return bool(spec.get("nodeName")) or bool(blacklisted_labels(spec, blacklist))


def is_node_self_target_with_mirror_pod(obj: Mapping[str, Any], is_pod: bool, node_name: str,
                                        username: str, groups: Sequence[str]) -> bool:
    """A node (``system:node:<name>`` in ``system:nodes``) creating a mirror pod on itself."""
    if not node_name or not is_pod:
        return False
    if not is_mirror_pod(obj):
        return False
    return (NODES_GROUP in groups and username.startswith(NODE_USER_PREFIX)
            and username[len(NODE_USER_PREFIX):] == node_name)


def is_controller(username: str) -> bool:
    """kube-controller-manager (its own identity or, with --use-service-account-credentials,
    a kube-system service account per controller). OpenShift's controllers ran as a privileged
    identity that could bind pods, so the pods a ReplicaSet or Job controller makes from a
    template (checked when the user wrote it) were never refused; upstream's controller roles
    lack pods/binding, so they are exempted by name instead."""
    return username == CONTROLLER_MANAGER_USER or username.startswith(CONTROLLER_USER_PREFIX)


def refusal(spec: Mapping[str, Any], blacklist: Sequence[str]) -> str | None:
    """The refusal for a user who may not bind pods; None when the spec asks for nothing."""
    labels = blacklisted_labels(spec, blacklist)
    shown = "[" + " ".join(labels) + "]"  # Go's %v of a []string
    if spec.get("nodeName") and labels:
        return BOTH_REFUSAL.format(labels=shown)
    if spec.get("nodeName"):
        return NODE_NAME_REFUSAL
    if labels:
        return LABELS_REFUSAL.format(labels=shown)
    return None
