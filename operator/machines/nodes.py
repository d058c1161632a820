"""What a Machine asks of its Node: the link annotation, its labels, its taints (additive).

Upstream's node-link controller (machine-api-operator pkg/controller/nodelink) annotates the
Node with ``machine.openshift.io/machine: <namespace>/<name>``, copies
``spec.metadata.annotations`` and ``spec.metadata.labels`` onto it (set or overwritten, never
removed: a key dropped from the Machine stays on the Node) and adds ``spec.taints`` that are
missing, never removing a taint someone else put there (a taint matches on key and effect, as
in the API server's taint identity). We also label the Node ``machine.openshift.io/machine=<name>``
so ``kubectl get nodes -l`` can find a Machine's Node, with an empty value when the name is no
valid label value (longer than 63 characters): every linked Node carries the label, which is
what the operator's Node watch selects on the server.

:func:`label_problems` checks, before any Node is made, that the labels a Machine asks of its
Node (``spec.metadata.labels``) are valid label keys and values (apimachinery's
``validation.IsQualifiedName`` / ``IsValidLabelValue`` rules, via :mod:`berthmaster.scheduler.
label_string`): the API server would refuse the Node, and the Machine would otherwise never
leave Provisioning.

Ownership: ``status.nodeRef`` is only a name, and anyone allowed to write a Machine's status can
point it at any Node. Before the drain and the Node deletion act on it, :func:`not_owned`
compares the Node's ``spec.providerID`` with the Machine's: they must be equal, which is how
upstream's node-link controller finds a Node's Machine in the first place
(openshift/machine-api-operator pkg/controller/nodelink/nodelink_controller.go,
``findMachineFromNodeByProviderID``), while its machine controller then trusts the nodeRef
(pkg/controller/machine/controller.go ``drainNode`` and ``deleteNode`` get the Node by name
alone). A Node with another providerID is left alone.

Pure: :func:`node_patch` returns a merge patch or None when the Node already conforms.
"""

from __future__ import annotations

import re
from typing import Any

from berthmaster.foundation.keys import key_of
from berthmaster.foundation.problems import Problems
from berthmaster.operator.machines.api import NODE_MACHINE
from berthmaster.scheduler.label_string import label_key_problem, label_value_problem

Taint = dict[str, Any]
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def taint_identity(taint: Taint) -> tuple[str, str]:
    return str(taint.get("key", "")), str(taint.get("effect", ""))


def missing_taints(current: list[Taint], wanted: list[Taint]) -> list[Taint]:
    have = {taint_identity(t) for t in current}
    missing = []
    for taint in wanted:
        if taint_identity(taint) not in have:
            missing.append({k: v for k, v in taint.items() if k in ("key", "value", "effect")})
            have.add(taint_identity(taint))
    return missing


def wanted_labels(machine: dict[str, Any]) -> dict[str, str]:
    meta = machine.get("metadata") or {}
    labels = dict(((machine.get("spec") or {}).get("metadata") or {}).get("labels") or {})
    name = str(meta.get("name", ""))
    labels[NODE_MACHINE] = name if len(name) <= 63 and _LABEL_VALUE.match(name) else ""
    return labels


def label_problems(machine: dict[str, Any], problems: Problems) -> None:
    """Every label of ``spec.metadata.labels`` no Node may carry, naming the field and why."""
    labels = ((machine.get("spec") or {}).get("metadata") or {}).get("labels") or {}
    for key, value in labels.items():
        where = f"spec.metadata.labels[{key!r}]"
        key_problem = label_key_problem(str(key))
        if key_problem is not None:
            problems.add(where, f"invalid label key: {key_problem}")
        value_problem = label_value_problem(str(value)) if isinstance(value, str) else \
            "must be a string"
        if value_problem is not None:
            problems.add(where, f"invalid label value {value!r}: {value_problem}")


def wanted_annotations(machine: dict[str, Any], link: str) -> dict[str, str]:
    """The link annotation, then ``spec.metadata.annotations`` over it (upstream's order)."""
    spec_meta = (machine.get("spec") or {}).get("metadata") or {}
    return {NODE_MACHINE: link, **{str(k): str(v)
                                   for k, v in (spec_meta.get("annotations") or {}).items()}}


def node_patch(node: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any] | None:
    link = key_of(machine)
    node_meta = node.get("metadata") or {}
    patch: dict[str, Any] = {}
    have_annotations = node_meta.get("annotations") or {}
    annotations = {k: v for k, v in wanted_annotations(machine, link).items()
                   if have_annotations.get(k) != v}
    if annotations:
        patch.setdefault("metadata", {})["annotations"] = annotations
    have_labels = node_meta.get("labels") or {}
    labels = {k: v for k, v in wanted_labels(machine).items() if have_labels.get(k) != v}
    if labels:
        patch.setdefault("metadata", {})["labels"] = labels
    current = (node.get("spec") or {}).get("taints") or []
    added = missing_taints(current, (machine.get("spec") or {}).get("taints") or [])
    if added:
        patch["spec"] = {"taints": [*current, *added]}
    return patch or None


def not_owned(node: dict[str, Any], machine: dict[str, Any]) -> str | None:
    """None when ``node`` is the Machine's instance (the same non-empty ``spec.providerID``);
    otherwise why the drain and the Node deletion leave it alone, naming both fields."""
    node_id = str((node.get("spec") or {}).get("providerID") or "")
    machine_id = str((machine.get("spec") or {}).get("providerID") or "")
    if machine_id and node_id == machine_id:
        return None
    node_name = (node.get("metadata") or {}).get("name")
    meta = machine.get("metadata") or {}
    return (f"Node {node_name!r} named by Machine {meta.get('namespace')}/{meta.get('name')} "
            f"status.nodeRef has spec.providerID {node_id!r}, not the Machine's spec.providerID "
            f"{machine_id!r}: it is not this Machine's Node, so it is neither drained nor "
            "deleted; correct status.nodeRef if it names the wrong Node")
