"""MachineSet decisions: which Machines are its own, how many to add, which to delete, status.

Pure functions over plain dicts, following upstream's machineset controller:

- a Machine belongs to a MachineSet when it matches ``spec.selector`` and has no other
  controller; orphans are adopted (a controller ownerReference is added); Machines being
  deleted do not count;
- new Machines are built from ``spec.template`` with ``generateName: <set>-`` and a controller
  ownerReference;
- when there are too many, :func:`machines_to_delete` ranks them by ``spec.deletePolicy`` in
  upstream's priority tiers (``delete_priority``): being deleted already, then the
  ``machine.openshift.io/delete-machine`` annotation (or its older
  ``cluster-api-delete-machine`` form) and Machines with ``status.errorReason/errorMessage``
  come first in every policy; Random then prefers Machines without a Node; Oldest maps the
  age onto 0..50 (``betterDelete``) with upstream's hundred-day exponential, and Newest is
  100 minus that, so under Oldest no age ever ties with the annotation's 100.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from berthmaster.foundation.times import parse_rfc3339
from berthmaster.operator.machines import api
from berthmaster.scheduler.model import SELECTOR_OPERATORS, LabelSelector, label_selector

Machine = dict[str, Any]

MUST_DELETE = 100.0
BETTER_DELETE = 50.0
PREFER_DELETE = 40.0
COULD_DELETE = 20.0
MUST_NOT_DELETE = 0.0
SECONDS_PER_HUNDRED_DAYS = 8640000.0
POLICIES = ("Random", "Newest", "Oldest")


def unsupported_policy(policy: str) -> str:
    """upstream's getDeletePriorityFunc error."""
    return (f"unsupported delete policy {policy}, must be one of 'Random', 'Newest', or "
            "'Oldest'")


class InvalidMachineSet(ValueError):
    """The MachineSet cannot be reconciled until its spec is fixed (message says how)."""


def validate(machineset: dict[str, Any]) -> list[str]:
    """Every problem with the MachineSet's spec, each naming the field and the fix."""
    name = (machineset.get("metadata") or {}).get("name")
    spec = machineset.get("spec") or {}
    problems = []
    selector = spec.get("selector") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        problems.append(f"MachineSet {name}: spec.selector: empty selector is not valid for "
                        "MachineSet; set matchLabels matching spec.template.metadata.labels")
    policy = spec.get("deletePolicy") or "Random"
    if policy not in POLICIES:
        problems.append(unsupported_policy(policy))
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    try:
        if selector and not selector_matches(selector, template_labels):
            problems.append(f"MachineSet {name}: spec.template.metadata.labels: `selector` does "
                            "not match template `labels`; add the selector's labels to the "
                            "template")
    except InvalidMachineSet as error:
        problems.append(str(error))
    return problems


def compile_selector(selector: Mapping[str, Any]) -> LabelSelector:
    """``spec.selector`` as upstream's ``metav1.LabelSelectorAsSelector`` reads it, matched by
    the placement model's :class:`LabelSelector` (the one matcher every selector uses). An
    operator it does not know is refused (InvalidMachineSet), whatever the labels, rather than
    matching nothing."""
    for expression in selector.get("matchExpressions") or []:
        operator = expression.get("operator")
        if operator not in SELECTOR_OPERATORS:
            raise InvalidMachineSet(f"spec.selector.matchExpressions: unknown operator "
                                    f"{operator!r}; use In, NotIn, Exists or DoesNotExist")
    return label_selector(selector)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return compile_selector(selector).matches(labels)


def controller_uid(machine: Machine) -> str | None:
    for ref in (machine.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def owned_machines(machineset: dict[str, Any], machines: Sequence[Machine]
                   ) -> tuple[list[Machine], list[Machine]]:
    """(Machines counted for this set, the orphans among them to adopt); sorted by name."""
    uid = (machineset.get("metadata") or {}).get("uid")
    selector = compile_selector((machineset.get("spec") or {}).get("selector") or {})
    counted, orphans = [], []
    for machine in sorted(machines, key=lambda m: m["metadata"]["name"]):
        owner = controller_uid(machine)
        if owner is not None and owner != uid:
            continue
        if api.deleting(machine):
            continue
        if not selector.matches((machine.get("metadata") or {}).get("labels") or {}):
            continue
        counted.append(machine)
        if owner is None:
            orphans.append(machine)
    return counted, orphans


def owner_reference(machineset: dict[str, Any]) -> dict[str, Any]:
    meta = machineset.get("metadata") or {}
    return {"apiVersion": api.API_VERSION, "kind": "MachineSet", "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}


def build_machine(machineset: dict[str, Any]) -> Machine:
    meta = machineset.get("metadata") or {}
    template = (machineset.get("spec") or {}).get("template") or {}
    template_meta = template.get("metadata") or {}
    metadata: dict[str, Any] = {
        "generateName": f"{meta.get('name')}-",
        "namespace": meta.get("namespace"),
        "labels": dict(template_meta.get("labels") or {}),
        "ownerReferences": [owner_reference(machineset)],
    }
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(template_meta["annotations"])
    return {"apiVersion": api.API_VERSION, "kind": "Machine", "metadata": metadata,
            "spec": dict(template.get("spec") or {})}


def _marked_for_deletion(machine: Machine) -> bool:
    annotations = (machine.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(api.DELETE_MACHINE) or annotations.get(api.OLD_DELETE_MACHINE))


def _unhealthy(machine: Machine) -> bool:
    status = machine.get("status") or {}
    return status.get("errorReason") is not None or status.get("errorMessage") is not None


def oldest_priority(machine: Machine, now: datetime) -> float:
    if api.deleting(machine) or _marked_for_deletion(machine) or _unhealthy(machine):
        return MUST_DELETE
    created = parse_rfc3339((machine.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return MUST_NOT_DELETE
    age = (now - created).total_seconds()
    if age < 0:
        return MUST_NOT_DELETE
    # Tends to BETTER_DELETE (never reaches it), so age never outranks an explicit mark.
    return BETTER_DELETE * (1.0 - math.exp(-age / SECONDS_PER_HUNDRED_DAYS))


def newest_priority(machine: Machine, now: datetime) -> float:
    if api.deleting(machine) or _marked_for_deletion(machine) or _unhealthy(machine):
        return MUST_DELETE
    return MUST_DELETE - oldest_priority(machine, now)


def random_priority(machine: Machine, now: datetime) -> float:
    if api.deleting(machine):
        return MUST_DELETE
    if _marked_for_deletion(machine) or _unhealthy(machine):
        return BETTER_DELETE
    if not (machine.get("status") or {}).get("nodeRef"):
        return PREFER_DELETE
    return COULD_DELETE


PRIORITIES = {"Random": random_priority, "Newest": newest_priority, "Oldest": oldest_priority}


def machines_to_delete(machines: Sequence[Machine], count: int, policy: str, now: datetime,
                       rng: random.Random | None = None) -> list[Machine]:
    """The ``count`` Machines to delete, highest priority first (ties: random for Random)."""
    if count <= 0:
        return []
    if count >= len(machines):
        return list(machines)
    priority = PRIORITIES.get(policy or "Random")
    if priority is None:
        raise InvalidMachineSet(unsupported_policy(policy))
    ordered = list(machines)
    if (policy or "Random") == "Random":
        (rng or random.Random()).shuffle(ordered)
    ordered.sort(key=lambda m: priority(m, now), reverse=True)  # stable: ties keep order
    return ordered[:count]


def node_ready_since(node: dict[str, Any] | None) -> datetime | None:
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return parse_rfc3339(condition.get("lastTransitionTime")) or datetime.min
    return None


def controller_name(machine: dict[str, Any]) -> str | None:
    """The name of the MachineSet controlling ``machine`` (its controller ownerReference)."""
    for ref in (machine.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "MachineSet":
            return str(ref.get("name"))
    return None


def node_readiness(node: dict[str, Any] | None) -> tuple[str, str] | None:
    """What of a Node its MachineSet's status reads (:func:`node_ready_since`): its Ready
    condition's status and lastTransitionTime; None for a Node that is gone or has none.
    A Node event that leaves this unchanged (a heartbeat, a label) changes no MachineSet."""
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status")), str(condition.get("lastTransitionTime"))
    return None


def next_sync(replicas: int, diff: int, status: dict[str, Any], more: bool,
              poll: float) -> float | None:
    """When a MachineSet is reconciled again without an event, after a reconcile that left
    ``status``: at once for the next creation batch; after ``poll`` while Machines are missing
    or surplus, while Nodes are not Ready yet, and while Ready ones wait out minReadySeconds;
    else never (None) — at rest only the watches bring it back (a Machine event, the Ready
    condition of one of its Nodes changing). As upstream's machineset controller: its
    Reconcile requeues for not-ready replicas and minReadySeconds only
    (openshift/machine-api-operator pkg/controller/machineset/controller.go)."""
    if more:
        return 0.0
    if diff != 0 or status.get("readyReplicas") != replicas or \
            status.get("availableReplicas") != replicas:
        return poll
    return None


def build_status(machineset: dict[str, Any], machines: Sequence[Machine],
                 nodes: dict[str, dict[str, Any]], now: datetime) -> dict[str, Any]:
    """status.replicas, fullyLabeledReplicas, readyReplicas, availableReplicas, labelSelector."""
    spec = machineset.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    fully_labeled = ready = available = 0
    for machine in machines:
        labels = (machine.get("metadata") or {}).get("labels") or {}
        if all(labels.get(k) == v for k, v in template_labels.items()):
            fully_labeled += 1
        node_name = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        since = node_ready_since(nodes.get(node_name or ""))
        if since is None:
            continue
        ready += 1
        if min_ready == 0 or since == datetime.min or (now - since).total_seconds() >= min_ready:
            available += 1
    return {
        "replicas": len(machines),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": (machineset.get("metadata") or {}).get("generation", 0),
        "labelSelector": selector_string(spec.get("selector") or {}),
    }


def selector_string(selector: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(sorted(expression.get("values") or []))
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
