"""The webhook's passes over one request, from facts gathered beforehand; pure.

The mutating pass runs the plugins' ``Admit`` (merge the namespace's node selector, NodeEnv's
project selector, default tolerations) and the validating pass their ``Validate`` (the same
checks on the object as every mutating webhook left it, and PodNodeConstraints, which only
validates), as kube-apiserver runs a built-in plugin's two halves. The scheduler-routing pass
(a webhook and path of its own, schedulername.py) sets berthmaster's schedulerName on new pods
of namespaces labelled for it. The server gathers the facts
a request needs first (the namespace's annotations and labels, the labels of a node NodeEnv
must check, the answer of a SubjectAccessReview), asking for each only when
:func:`node_to_read` or :func:`needs_binding_check` say the decision depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.operator.admission import podnodeconstraints as pnc
from berthmaster.operator.admission import podnodeselector as pns
from berthmaster.operator.admission import podtolerationrestriction as ptr
from berthmaster.operator.admission import schedulername
from berthmaster.operator.admission.config import AdmissionConfig
from berthmaster.operator.admission.review import Request, forbidden_message, object_name
from berthmaster.operator.admission.selectors import SelectorError


@dataclass(frozen=True)
class Facts:
    namespace_annotations: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    # Labels of the pod's nodeName node when NodeEnv needs them; node_error when unreadable.
    node_labels: Mapping[str, str] | None = None
    node_error: str | None = None
    # The SubjectAccessReview's answer for pods/binding; None when not asked.
    may_bind: bool | None = None


@dataclass(frozen=True)
class Verdict:
    patch: list[dict[str, Any]] = field(default_factory=list)
    refusal: str | None = None
    code: int = 403


def _spec(request: Request) -> Mapping[str, Any]:
    spec = request.object.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _pod_name(request: Request) -> str:
    return str((request.object.get("metadata") or {}).get("name") or "")


def _bad_annotation(request: Request, error: Exception) -> Verdict:
    return Verdict(refusal=f"namespace {request.namespace}: {error}; fix the namespace's "
                           "annotation", code=400)


def too_many_tolerations(request: Request, limit: int) -> Verdict | None:
    """A pod with more tolerations than this webhook merges (``--max-tolerations``) is refused
    before any work on them; no upstream plugin caps them, so the sentence is ours."""
    if not request.is_pod:
        return None
    tolerations = _spec(request).get("tolerations")
    count = len(tolerations) if isinstance(tolerations, list) else 0
    if count <= limit:
        return None
    return Verdict(refusal=forbidden_message(
        "", "pods", object_name(request),
        f"spec.tolerations has {count} entries, more than the {limit} berthmaster placement "
        "admission accepts (berthmaster admission --max-tolerations; chart value "
        "admission.maxTolerations); remove tolerations or raise the limit"), code=422)


def node_to_read(request: Request) -> str | None:
    """The node whose labels NodeEnv checks: a new pod's nodeName, when it sets one (whether
    the project selector makes it matter is known only with the namespace)."""
    if request.is_pod and request.operation == "CREATE":
        return str(_spec(request).get("nodeName") or "") or None
    return None


def needs_binding_check(request: Request, config: AdmissionConfig) -> bool:
    """Whether PodNodeConstraints' answer depends on the user's pods/binding right."""
    constraints = config.constraints
    if not constraints.enabled or not pnc.applies(request.group, request.resource,
                                                  request.subresource, request.operation):
        return False
    spec = pnc.pod_spec(request.object, request.group, request.resource) or {}
    if not pnc.needs_access_check(spec, constraints.blacklist):
        return False
    if pnc.is_controller(request.user.username):
        return False
    return not pnc.is_node_self_target_with_mirror_pod(
        request.object, request.is_pod, str(spec.get("nodeName") or ""),
        request.user.username, request.user.groups)


def _node_selector_pass(request: Request, config: AdmissionConfig, facts: Facts,
                        selector: dict[str, str], mutating: bool
                        ) -> tuple[dict[str, str], Verdict | None]:
    """PodNodeSelector then NodeEnv on a new pod: the selector after both, or a refusal."""
    annotations = facts.namespace_annotations
    settings = config.node_selector
    try:
        namespace_selector = pns.namespace_node_selector(annotations, request.namespace,
                                                         settings)
        project_selector = pns.project_node_selector(annotations)
    except SelectorError as error:
        return selector, _bad_annotation(request, error)
    whitelist = settings.whitelists.get(request.namespace, {})
    if mutating:
        outcome = pns.admit(selector, namespace_selector, whitelist)
        refusal = outcome.refusal
        selector = outcome.node_selector or selector
    else:
        refusal = pns.validate(selector, namespace_selector, whitelist)
    if refusal:
        return selector, Verdict(refusal=forbidden_message("", "pods", _pod_name(request),
                                                           refusal))
    if project_selector is None:
        return selector, None
    node_name = str(_spec(request).get("nodeName") or "")
    if node_name and project_selector and facts.node_labels is None:
        return selector, Verdict(refusal=forbidden_message(
            "", "pods", _pod_name(request),
            f"cannot validate project node label selector: {facts.node_error}"))
    env = pns.node_env(selector, project_selector, facts.node_labels, node_name,
                       mutation_allowed=mutating)
    if env.refusal:
        return selector, Verdict(refusal=forbidden_message("", "pods", _pod_name(request),
                                                           env.refusal))
    return env.node_selector or selector, None


def mutate(request: Request, config: AdmissionConfig, facts: Facts) -> Verdict:
    """The mutating pass over a pod: its new nodeSelector and tolerations as a JSON patch."""
    if not request.is_pod or request.operation not in ("CREATE", "UPDATE"):
        return Verdict()
    spec = _spec(request)
    patch: list[dict[str, Any]] = []
    if request.operation == "CREATE":
        before = dict(spec.get("nodeSelector") or {})
        selector, refused = _node_selector_pass(request, config, facts, before, mutating=True)
        if refused:
            return refused
        if selector != before:
            patch.append({"op": "add", "path": "/spec/nodeSelector", "value": selector})
    try:
        outcome = ptr.admit(request.object, request.operation, facts.namespace_annotations,
                            config.tolerations)
    except ptr.TolerationsAnnotationError as error:
        return _bad_annotation(request, error)
    if outcome.refusal:
        return Verdict(refusal=outcome.refusal)
    if outcome.tolerations is not None:
        patch.append({"op": "add", "path": "/spec/tolerations", "value": outcome.tolerations})
    return Verdict(patch=patch)


def route_scheduler_name(request: Request, facts: Facts, scheduler_name: str) -> Verdict:
    """The scheduler-routing pass (schedulername.py): berthmaster's schedulerName on a new
    pod of a namespace labelled for it; never a refusal."""
    if not request.is_pod:
        return Verdict()
    return Verdict(patch=schedulername.route(request.object, request.operation,
                                             facts.namespace_labels, scheduler_name))


def validate(request: Request, config: AdmissionConfig, facts: Facts) -> Verdict:
    """The validating pass: the plugins' checks on the final object, then PodNodeConstraints."""
    if request.is_pod and request.operation in ("CREATE", "UPDATE"):
        spec = _spec(request)
        if request.operation == "CREATE":
            _, refused = _node_selector_pass(request, config, facts,
                                             dict(spec.get("nodeSelector") or {}),
                                             mutating=False)
            if refused:
                return refused
        try:
            refusal = ptr.validate(list(spec.get("tolerations") or []),
                                   facts.namespace_annotations, config.tolerations)
        except ptr.TolerationsAnnotationError as error:
            return _bad_annotation(request, error)
        if refusal:
            return Verdict(refusal=refusal)
    if facts.may_bind is False and needs_binding_check(request, config):
        spec = pnc.pod_spec(request.object, request.group, request.resource) or {}
        refusal = pnc.refusal(spec, config.constraints.blacklist)
        if refusal:
            return Verdict(refusal=forbidden_message(request.group, request.resource,
                                                     object_name(request), refusal))
    return Verdict()
