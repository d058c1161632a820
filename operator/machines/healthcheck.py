"""MachineHealthCheck decisions: which Machines are unhealthy, and whether to remediate them.

Pure: every function here takes the recorded state (the MachineHealthCheck, the Machines its
selector matches, their Nodes, the time) and returns a value; the controller does the I/O.
The rules are machine-api-operator's (``pkg/controller/machinehealthcheck/
machinehealthcheck_controller.go``):

- a target is unhealthy (``needsRemediation``) when its Machine is ``Failed``; when it has no
  Node and ``status.lastUpdated`` is older than ``nodeStartupTimeout`` (``0`` disables the
  check); when its ``status.nodeRef`` names a Node that no longer exists; or when the Node has
  had one of ``unhealthyConditions`` (type and status) for longer than its timeout. A Node
  that matches a condition but not yet for long enough is neither healthy nor remediated, and
  the check is repeated one second after the timeout would expire;
- healthy (``healthCheckTargets``) means: none of the above, not being deleted, Node present;
- remediation is allowed (``isAllowedRemediation``) while ``expected - healthy`` is at most
  ``maxUnhealthy`` (an integer, or a percentage of the expected Machines rounded down);
  otherwise nothing is remediated, ``RemediationAllowed`` is False with reason
  ``TooManyUnhealthy`` and a ``RemediationRestricted`` warning is posted;
- remediating (``internalRemediation``) a Machine deletes it, unless it has no controller owner
  (``SkippedNoController``) or is already being deleted (nothing to do: what makes a restarted
  operator repeat nothing).

Timeouts have minimums, refused by the CRD's CEL rules and again here (for checks stored before
the rules): ``nodeStartupTimeout`` is ``0`` or at least 30 s, Cluster API's webhook minimum
(``api/v1beta1/machinehealthcheck_webhook.go``, ``minNodeStartupTimeout``); an unhealthy
condition's ``timeout`` is at least 1 s, berthmaster's own floor (openshift/api and
machine-api-operator accept ``0s``, which remediates a Node at the first report of a condition).
``maxUnhealthy`` defaults to ``100%`` exactly as upstream (the CRD default and
``getMaxUnhealthy``): only an explicit ``maxUnhealthy`` short-circuits a mass remediation.

External remediation, as upstream: with ``spec.remediationTemplate`` an unhealthy Machine is
not deleted; a remediation request is made from the template (:func:`build_remediation_request`,
pkg/util/external/util.go ``GenerateTemplate``: the template's ``spec.template``, named after
the Machine, owned by it, annotated ``machine.openshift.io/cloned-from-name`` and
``cloned-from-groupkind``) for an external controller to act on, once (an existing request is
waited for), and deleted when the Machine is healthy again (``cleanEMR``). With the check
annotated ``machine.openshift.io/remediation-strategy: external-baremetal`` (metal3's strategy)
and no template, an unhealthy Machine that has not Failed is annotated
``host.metal3.io/external-remediation`` instead of deleted (``remediationStrategyExternal``),
and a Machine carrying that annotation never counts as healthy. A spec the CRD's schema could not
refuse (an unknown selector operator, a template reference without kind or name) makes
``RemediationAllowed`` False with a reason and a message naming the field, and nothing is
remediated.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from berthmaster.foundation.durations import format_go_duration, parse_go_timedelta
from berthmaster.foundation.kube import group_path, resource_path
from berthmaster.foundation.problems import Problems
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.operator.machines import api
from berthmaster.operator.machines.conditions import (
    Condition,
    false_condition,
    true_condition,
)
from berthmaster.operator.machines.machineset import InvalidMachineSet, selector_matches
from berthmaster.operator.machines.providers import owned

JSON = dict[str, Any]

MACHINEHEALTHCHECKS = "machinehealthchecks"
KIND = "MachineHealthCheck"
COMPONENT = "machinehealthcheck-controller"  # upstream's controllerName

# openshift/api machine/v1beta1 (types_machinehealthcheck.go, common types).
PAUSED = "cluster.x-k8s.io/paused"
REMEDIATION_ALLOWED = "RemediationAllowed"
TOO_MANY_UNHEALTHY = "TooManyUnhealthy"
DEFAULT_MAX_UNHEALTHY = "100%"
DEFAULT_NODE_STARTUP_TIMEOUT = "10m"
# Cluster API api/v1beta1 machinehealthcheck_webhook.go: minNodeStartupTimeout ("0" disables).
MIN_NODE_STARTUP_TIMEOUT = timedelta(seconds=30)
# berthmaster's floor for unhealthyConditions[].timeout (no upstream sets one).
MIN_CONDITION_TIMEOUT = timedelta(seconds=1)
# berthmaster: the reason a spec is refused.
INVALID_CONFIGURATION = "InvalidConfiguration"
# External remediation (openshift/api machine/v1beta1 types_machinehealthcheck.go and
# common types; machinehealthcheck_controller.go, pkg/util/external/util.go).
EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE = "ExternalRemediationTemplateAvailable"
EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND = "ExternalRemediationTemplateNotFound"
EXTERNAL_REMEDIATION_REQUEST_AVAILABLE = "ExternalRemediationRequestAvailable"
EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED = "ExternalRemediationRequestCreationFailed"
TEMPLATE_SUFFIX = "Template"
CLONED_FROM_NAME = "machine.openshift.io/cloned-from-name"
CLONED_FROM_GROUP_KIND = "machine.openshift.io/cloned-from-groupkind"
REMEDIATION_STRATEGY = "machine.openshift.io/remediation-strategy"
REMEDIATION_STRATEGY_EXTERNAL = "external-baremetal"
EXTERNAL_REMEDIATION_ANNOTATION = "host.metal3.io/external-remediation"
EXTERNAL_ANNOTATION_ADDED = "ExternalAnnotationAdded"
EXTERNAL_ANNOTATION_FAILED = "ExternalAnnotationFailed"

# Event reasons (machinehealthcheck_controller.go).
REMEDIATION_RESTRICTED = "RemediationRestricted"
DETECTED_UNHEALTHY = "DetectedUnhealthy"
SKIPPED_NO_CONTROLLER = "SkippedNoController"
MACHINE_DELETION_FAILED = "MachineDeletionFailed"
MACHINE_DELETED = "MachineDeleted"

# Upstream requeues a restricted check at once (1 ms); Machine and Node events already bring
# it back whenever something changes, so a slower safety net is enough here.
RESTRICTED_RECHECK = timedelta(seconds=10)


def mhc_path(namespace: str | None, name: str | None = None, sub: str = "") -> str:
    return resource_path(group_path(api.GROUP, api.VERSION), MACHINEHEALTHCHECKS, namespace,
                         name, sub)


@dataclass(frozen=True)
class UnhealthyCondition:
    type: str
    status: str
    timeout: timedelta


@dataclass(frozen=True)
class TemplateRef:
    """``spec.remediationTemplate``: the template object, in the check's namespace."""

    api_version: str
    kind: str
    name: str

    @property
    def request_kind(self) -> str:
        """The kind of the requests made from it: the template's kind without ``Template``."""
        return self.kind.removesuffix(TEMPLATE_SUFFIX)

    @property
    def group_kind(self) -> str:
        """``schema.GroupKind.String()``: ``Kind.group``, or ``Kind`` in the core group."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.kind}.{group}" if group else self.kind


@dataclass(frozen=True)
class HealthCheckSpec:
    selector: JSON
    unhealthy_conditions: tuple[UnhealthyCondition, ...]
    max_unhealthy: int | str  # an integer or "<n>%"
    node_startup_timeout: timedelta  # zero: startup check disabled
    remediation_template: TemplateRef | None = None
    # the check's machine.openshift.io/remediation-strategy is external-baremetal
    external_baremetal: bool = False


class RefusedSpec(Exception):
    """The spec cannot be acted on; ``reason`` is the RemediationAllowed condition's."""

    def __init__(self, reason: str, name: str, problems: Problems):
        self.problems = problems.lines(f"MachineHealthCheck {name}")
        super().__init__("; ".join(self.problems))
        self.reason = reason


def _duration(value: Any, where: str, problems: Problems) -> timedelta | None:
    try:
        return parse_go_timedelta(str(value), allow_zero=True)
    except ValueError:
        problems.add(where, f"{value!r} is not a duration; use a number with a unit "
                            "(ns, us, ms, s, m, h), such as 300s or 10m")
        return None


def parse_max_unhealthy(value: Any) -> int | str:
    """An integer or a whole percentage up to 100%; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        return value
    text = str(value)
    digits = text[:-1] if text.endswith("%") else text
    if not digits.isdigit() or (text.endswith("%") and int(digits) > 100):
        raise ValueError(value)
    return text if text.endswith("%") else int(digits)


def parse_spec(mhc: JSON) -> HealthCheckSpec:
    """The spec with upstream's defaults; :class:`RefusedSpec` names every field to fix."""
    name = (mhc.get("metadata") or {}).get("name")
    spec = mhc.get("spec") or {}
    problems = Problems()
    template = template_ref(spec.get("remediationTemplate"), problems)
    conditions = []
    for index, raw in enumerate(spec.get("unhealthyConditions") or []):
        where = f"spec.unhealthyConditions[{index}].timeout"
        timeout = _duration(raw.get("timeout", ""), where, problems)
        if timeout is not None and timeout < MIN_CONDITION_TIMEOUT:
            problems.add(where, f"{raw.get('timeout')!r} is below the minimum of 1s; a shorter "
                                "timeout remediates a Node at the first report of the condition "
                                "(OpenShift's examples use 300s)")
        conditions.append(UnhealthyCondition(str(raw.get("type")), str(raw.get("status")),
                                             timeout or timedelta(0)))
    if not conditions:
        problems.add("spec.unhealthyConditions", "at least one condition is required, such as "
                     "{type: Ready, status: 'False', timeout: 300s}")
    raw_max = spec.get("maxUnhealthy", DEFAULT_MAX_UNHEALTHY)
    try:
        max_unhealthy = parse_max_unhealthy(raw_max)
    except ValueError:
        problems.add("spec.maxUnhealthy", f"{raw_max!r} is neither a non-negative integer nor a "
                     "percentage up to 100%, such as 2 or 40%")
        max_unhealthy = 0
    raw_startup = spec.get("nodeStartupTimeout", DEFAULT_NODE_STARTUP_TIMEOUT)
    startup = _duration(raw_startup, "spec.nodeStartupTimeout", problems)
    if startup is not None and timedelta(0) < startup < MIN_NODE_STARTUP_TIMEOUT:
        problems.add("spec.nodeStartupTimeout", f"{raw_startup!r} must be \"0\" (no startup "
                     "check) or at least 30s, as Cluster API's MachineHealthCheck webhook "
                     "requires")
    selector = dict(spec.get("selector") or {})
    try:
        selector_matches(selector, {})
    except InvalidMachineSet as error:
        problems.add("", str(error))  # the error names its field
    if problems:
        raise RefusedSpec(INVALID_CONFIGURATION, str(name), problems)
    strategy = ((mhc.get("metadata") or {}).get("annotations") or {}).get(REMEDIATION_STRATEGY)
    return HealthCheckSpec(selector, tuple(conditions), max_unhealthy, startup or timedelta(0),
                           template, strategy == REMEDIATION_STRATEGY_EXTERNAL)


def template_ref(raw: Any, problems: Problems) -> TemplateRef | None:
    if not raw:
        return None
    missing = [f for f in ("apiVersion", "kind", "name") if not raw.get(f)]
    if missing:
        problems.add("spec.remediationTemplate", f"{', '.join(missing)} missing; name the "
                     "template object, such as {apiVersion: "
                     "infrastructure.cluster.x-k8s.io/v1beta1, kind: "
                     "Metal3RemediationTemplate, name: metal3-remediation-template}")
        return None
    return TemplateRef(str(raw["apiVersion"]), str(raw["kind"]), str(raw["name"]))


def max_unhealthy_count(value: int | str, expected: int) -> int:
    """Upstream's ``getMaxUnhealthy``: a percentage of ``expected``, rounded down."""
    if isinstance(value, int):
        return value
    return int(value[:-1]) * expected // 100


# -- one target ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A Machine the check selects and what is known of its Node.

    ``node`` is the Node object, or None when the Machine has no ``status.nodeRef`` or when the
    Node it names was not found (``node_missing``)."""

    machine: JSON
    node: JSON | None = None
    node_missing: bool = False

    @property
    def name(self) -> str:
        return str(self.machine["metadata"]["name"])

    @property
    def node_name(self) -> str:
        ref = (self.machine.get("status") or {}).get("nodeRef") or {}
        return str(ref.get("name") or "")


@dataclass(frozen=True)
class Health:
    """``unhealthy``: remediate now; else ``next_check`` (> 0) when it may soon become so."""

    unhealthy: bool
    next_check: timedelta | None = None
    why: str = ""


def node_condition(node: JSON, kind: str) -> JSON | None:
    return next((c for c in (node.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind), None)


def check_target(target: Target, spec: HealthCheckSpec, now: datetime) -> Health:
    """Upstream's ``needsRemediation`` for one target."""
    status = target.machine.get("status") or {}
    if status.get("phase") == api.FAILED:
        return Health(True, why="machine phase is Failed")
    if target.node is None and not target.node_missing:
        if spec.node_startup_timeout == timedelta(0):
            return Health(False)
        updated = parse_rfc3339(status.get("lastUpdated"))
        if updated is None:
            return Health(False, spec.node_startup_timeout)
        if updated + spec.node_startup_timeout < now:
            return Health(True, why="machine has no node after "
                          f"{format_go_duration(spec.node_startup_timeout.total_seconds())}")
        return Health(False, spec.node_startup_timeout - (now - updated) + timedelta(seconds=1))
    if target.node is None:
        return Health(True, why=f"node {target.node_name} not found")
    soonest: timedelta | None = None
    for wanted in spec.unhealthy_conditions:
        found = node_condition(target.node, wanted.type)
        if found is None or found.get("status") != wanted.status:
            continue
        since = parse_rfc3339(found.get("lastTransitionTime")) or now
        if since + wanted.timeout < now:
            return Health(True, why=f"condition {wanted.type} in state {wanted.status} longer "
                                    f"than {format_go_duration(wanted.timeout.total_seconds())}")
        wait = wanted.timeout - (now - since) + timedelta(seconds=1)
        if wait > timedelta(0) and (soonest is None or wait < soonest):
            soonest = wait
    return Health(False, soonest)


def externally_remediated(machine: JSON) -> bool:
    """metal3's strategy asked for this Machine's remediation
    (``externalRemediationAnnotationExists``)."""
    annotations = (machine.get("metadata") or {}).get("annotations") or {}
    return EXTERNAL_REMEDIATION_ANNOTATION in annotations


def is_healthy(target: Target, health: Health) -> bool:
    """Counted in ``currentHealthy`` (upstream's ``healthCheckTargets``): a Machine handed to
    metal3's external remediation is not, so it counts against ``maxUnhealthy``."""
    return (not health.unhealthy and not health.next_check and not api.deleting(target.machine)
            and target.node is not None and not externally_remediated(target.machine))


def has_controller_owner(machine: JSON) -> bool:
    return any(ref.get("controller") for ref in
               (machine.get("metadata") or {}).get("ownerReferences") or [])


# -- the whole check -----------------------------------------------------------------------------


@dataclass
class HealthCheckDecision:
    """What one reconcile of a MachineHealthCheck does."""

    expected: int = 0
    healthy: int = 0
    remediations_allowed: int = 0
    condition: Condition = field(default_factory=dict)
    delete: list[Target] = field(default_factory=list)  # remediate by deleting the Machine
    external: list[Target] = field(default_factory=list)  # remediation request from the template
    annotate: list[Target] = field(default_factory=list)  # metal3's external-baremetal strategy
    recovered: list[Target] = field(default_factory=list)  # healthy: their requests are deleted
    no_controller: list[Target] = field(default_factory=list)  # SkippedNoController
    detected: list[Target] = field(default_factory=list)  # DetectedUnhealthy (not yet due)
    restricted_message: str = ""  # RemediationRestricted event, when set
    next_check: timedelta | None = None

    @property
    def unhealthy(self) -> int:
        return self.expected - self.healthy


def selects(spec: HealthCheckSpec, machine: JSON, provider_kinds: Collection[str]) -> bool:
    """The check's selector matches the Machine and the Machine is berthmaster's to remediate:
    its provider is one of ``provider_kinds`` or it opted in (``providers.owned``, the Machine
    controller's own rule). Beside another machine controller, that controller's Machines are
    not ours to delete (docs/machines.md)."""
    labels = (machine.get("metadata") or {}).get("labels") or {}
    return selector_matches(spec.selector, labels) and owned(machine, provider_kinds)


def decide_health_check(mhc: JSON, spec: HealthCheckSpec, targets: list[Target],
                        now: datetime) -> HealthCheckDecision:
    """Reconcile's decision over recorded state: status counts, condition, what to remediate."""
    decision = HealthCheckDecision(expected=len(targets))
    unhealthy: list[Target] = []
    waits: list[timedelta] = []
    for target in targets:
        health = check_target(target, spec, now)
        if health.unhealthy:
            unhealthy.append(target)
        elif health.next_check:
            decision.detected.append(target)
            waits.append(health.next_check)
        elif is_healthy(target, health):
            decision.healthy += 1
            if spec.remediation_template is not None:
                decision.recovered.append(target)
    limit = max(0, max_unhealthy_count(spec.max_unhealthy, decision.expected))
    decision.remediations_allowed = max(0, limit - decision.unhealthy)
    if decision.unhealthy > limit:
        raw = (mhc.get("spec") or {}).get("maxUnhealthy", DEFAULT_MAX_UNHEALTHY)
        counts = (f"total: {decision.expected}, unhealthy: {decision.unhealthy}, "
                  f"maxUnhealthy: {raw}")
        decision.condition = false_condition(
            REMEDIATION_ALLOWED, TOO_MANY_UNHEALTHY,
            "Remediation is not allowed, the number of not started or unhealthy machines "
            f"exceeds maxUnhealthy ({counts})")
        decision.restricted_message = ("Remediation restricted due to exceeded number of "
                                       f"unhealthy machines ({counts})")
        decision.next_check = RESTRICTED_RECHECK
        return decision
    decision.condition = true_condition(REMEDIATION_ALLOWED)
    for target in unhealthy:
        if spec.remediation_template is not None:
            decision.external.append(target)  # upstream's externalRemediation
        elif spec.external_baremetal and (target.machine.get("status") or {}).get(
                "phase") != api.FAILED:
            if not externally_remediated(target.machine):  # remediationStrategyExternal
                decision.annotate.append(target)
        elif not has_controller_owner(target.machine):
            decision.no_controller.append(target)
        elif not api.deleting(target.machine):
            decision.delete.append(target)
    decision.next_check = min(waits) if waits else None
    return decision


def refused(spec_error: RefusedSpec) -> HealthCheckDecision:
    """A check whose spec is refused: it monitors nothing and never remediates."""
    return HealthCheckDecision(condition=false_condition(
        REMEDIATION_ALLOWED, spec_error.reason, str(spec_error)))


def target_text(mhc: JSON, target: Target) -> str:
    """Upstream's ``target.string()``: ``<namespace>/<mhc>/<machine>/<node>``."""
    meta = mhc.get("metadata") or {}
    node = target.node_name if (target.node is not None or target.node_missing) else ""
    return f"{meta.get('namespace')}/{meta.get('name')}/{target.name}/{node}"


def paused(mhc: JSON) -> bool:
    return PAUSED in ((mhc.get("metadata") or {}).get("annotations") or {})


def build_remediation_request(template: JSON, ref: TemplateRef, machine: JSON) -> JSON:
    """The remediation request for ``machine`` from the template object (pure;
    pkg/util/external/util.go ``GenerateTemplate`` and the controller's ``externalRemediation``):
    its ``spec.template`` with server-set fields dropped, named after the Machine (one request per
    Machine and kind), in the Machine's namespace, owned by the Machine (deleting the Machine
    deletes the request), annotated with where it was cloned from. ValueError names what is
    missing."""
    meta = machine.get("metadata") or {}
    body = (template.get("spec") or {}).get("template")
    if not isinstance(body, Mapping):
        raise ValueError(f"missing Spec.Template on {template.get('kind')} "
                         f"{(template.get('metadata') or {}).get('name')!r}; give the template "
                         "a spec.template holding the request's spec")
    request: JSON = copy.deepcopy(dict(body))
    request_meta = dict(request.get("metadata") or {})
    for server_field in ("resourceVersion", "finalizers", "uid", "selfLink", "generateName"):
        request_meta.pop(server_field, None)
    request_meta["name"] = meta.get("name")
    request_meta["namespace"] = meta.get("namespace")
    request_meta["annotations"] = {**(request_meta.get("annotations") or {}),
                                   CLONED_FROM_NAME: ref.name,
                                   CLONED_FROM_GROUP_KIND: ref.group_kind}
    request_meta["ownerReferences"] = [{"apiVersion": api.API_VERSION, "kind": "Machine",
                                        "name": meta.get("name"), "uid": meta.get("uid")}]
    request["metadata"] = request_meta
    request.setdefault("apiVersion", template.get("apiVersion"))
    request.setdefault("kind", str(template.get("kind") or "").removesuffix(TEMPLATE_SUFFIX))
    return request
