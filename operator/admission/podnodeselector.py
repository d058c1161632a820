"""PodNodeSelector and OpenShift's project node selector (NodeEnv), as pure decisions.

Upstream (plugin/pkg/admission/podnodeselector/admission.go, ``Admit``/``Validate``/
``getNodeSelectorMap``): a new pod's ``nodeSelector`` is merged with its namespace's
``scheduler.alpha.kubernetes.io/node-selector`` annotation, or with ``clusterDefaultNodeSelector``
when the namespace has no such annotation; a pod whose selector disagrees with the namespace's
is refused, and so is a pod whose merged selector leaves the namespace's whitelist (the entry
named after the namespace in ``podNodeSelectorPluginConfig``; no entry allows anything).

OpenShift (openshift-kube-apiserver/admission/scheduler/nodeenv/admission.go, ``admit``): a
namespace without the upstream annotation but with ``openshift.io/node-selector`` gets that
selector merged the same way, refused with "project" in the message, and a pod that names a
node (``nodeName``) must name one the project selector matches. When the validating pass finds
the selector not extended (something removed it after the mutating pass), it refuses too.

Each function returns the refusal reason (upstream's sentence) or ``None``; the caller wraps it
as ``pods "<name>" is forbidden: <reason>`` (:func:`review.forbidden_message`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from berthmaster.operator.admission.selectors import (
    conflicts,
    is_subset,
    merge,
    selector_to_map,
)

NAME = "PodNodeSelector"
NODE_ENV_NAME = "OriginPodNodeEnvironment"
NAMESPACE_ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"
PROJECT_ANNOTATION = "openshift.io/node-selector"
CLUSTER_DEFAULT_KEY = "clusterDefaultNodeSelector"

CONFLICT = "pod node label selector conflicts with its namespace node label selector"
WHITELIST_CONFLICT = "pod node label selector labels conflict with its namespace whitelist"
PROJECT_CONFLICT = "pod node label selector conflicts with its project node label selector"
PROJECT_NOT_EXTENDED = "pod node label selector does not extend project node label selector"
PROJECT_NODE_CONFLICT = "pod node name conflicts with project node label selector"


@dataclass(frozen=True)
class Settings:
    """``podNodeSelectorPluginConfig``: the cluster default and one whitelist per namespace,
    each already parsed (config.py validates the strings)."""

    cluster_default: Mapping[str, str] = field(default_factory=dict)
    whitelists: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """The pod's new ``nodeSelector`` (None: leave it) or the refusal reason."""

    node_selector: dict[str, str] | None = None
    refusal: str | None = None


def namespace_node_selector(annotations: Mapping[str, str], namespace: str,
                            settings: Settings) -> dict[str, str]:
    """The namespace's node selector: its annotation, else the cluster default.

    Raises ``SelectorError`` when the annotation does not parse (upstream answers the
    request with that error)."""
    if NAMESPACE_ANNOTATION in annotations:
        return selector_to_map(annotations[NAMESPACE_ANNOTATION])
    return dict(settings.cluster_default)


def admit(pod_selector: Mapping[str, str], namespace_selector: Mapping[str, str],
          whitelist: Mapping[str, str]) -> Outcome:
    """The mutating pass: refuse a conflict, merge (the pod's pairs win, though a conflict was
    refused already), then the validating checks on the merged selector."""
    if conflicts(namespace_selector, pod_selector):
        return Outcome(refusal=CONFLICT)
    merged = merge(namespace_selector, pod_selector)
    refusal = validate(merged, namespace_selector, whitelist)
    if refusal:
        return Outcome(refusal=refusal)
    return Outcome(node_selector=merged if merged != dict(pod_selector) else None)


def validate(pod_selector: Mapping[str, str], namespace_selector: Mapping[str, str],
             whitelist: Mapping[str, str]) -> str | None:
    """The validating pass: no conflict with the namespace, and inside its whitelist."""
    if conflicts(namespace_selector, pod_selector):
        return CONFLICT
    if not is_subset(pod_selector, whitelist):
        return WHITELIST_CONFLICT
    return None


def project_node_selector(annotations: Mapping[str, str]) -> dict[str, str] | None:
    """NodeEnv's selector for the namespace, or None when NodeEnv leaves the pod alone (the
    upstream annotation is set, or neither is). Raises ``SelectorError`` when malformed."""
    if NAMESPACE_ANNOTATION in annotations or PROJECT_ANNOTATION not in annotations:
        return None
    return selector_to_map(annotations[PROJECT_ANNOTATION])


def node_env(pod_selector: Mapping[str, str], project_selector: Mapping[str, str],
             node_labels: Mapping[str, str] | None, node_name: str,
             mutation_allowed: bool) -> Outcome:
    """NodeEnv's pass. ``node_labels`` are the labels of the pod's ``nodeName`` node (None when
    it names none, or when the node could not be read: the caller refuses that itself)."""
    if conflicts(project_selector, pod_selector):
        return Outcome(refusal=PROJECT_CONFLICT)
    merged = merge(project_selector, pod_selector)
    if not mutation_allowed and len(merged) != len(pod_selector):
        return Outcome(refusal=PROJECT_NOT_EXTENDED)
    if node_name and project_selector and node_labels is not None and any(
            node_labels.get(key) != value for key, value in project_selector.items()):
        return Outcome(refusal=PROJECT_NODE_CONFLICT)
    return Outcome(node_selector=merged if merged != dict(pod_selector) else None)

