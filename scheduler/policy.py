"""The scheduler Policy file (``kind: Policy``, v1, JSON or YAML) -> configured predicates and
weighted priorities, with validation that reports every problem at once.

Format (docs/engine.md, "The Policy file"; upstream's k8s.io/kube-scheduler config/v1 ``Policy``
before 1.23): ``predicates[]`` and ``priorities[]``, each entry ``name`` plus, for priorities, a
positive integer ``weight``; configurable entries carry an ``argument`` with exactly one of
``serviceAffinity`` / ``labelsPresence`` (predicates) or ``serviceAntiAffinity`` /
``labelPreference`` (priorities) and may use any name. A file replaces the defaults completely; a
file omitting a list entirely gets the default list for it (as upstream); an empty list means none.
``version: v1`` (as OpenShift's documented samples write it) is accepted for ``apiVersion: v1``.
Lines holding only ``...`` (the elision marks in those samples, which YAML would read as a document
end) are ignored.

``CheckNodeUnschedulable`` and ``PodToleratesNodeTaints`` always run, whatever the policy lists
(upstream's mandatory predicates from 1.14 until the Policy API was removed): a cordoned node
takes no new pods and a ``NoSchedule``-tainted one (the control plane's) none that do not
tolerate the taint (v1.22 pkg/scheduler/framework/plugins/legacy_registry.go,
NewLegacyRegistry's mandatoryPredicates, joined to every Policy's by AppendPredicateConfigs).
``CheckVolumeBinding`` runs too, whatever the policy lists: the scheduling document says it
must be enabled in non-default schedulers, and berthmaster is one (without it a pod's
WaitForFirstConsumer claims are never provisioned).
``hardPodAffinitySymmetricWeight`` (1..100; 0 or absent means the default, 1, as v1.22
pkg/scheduler/factory.go, createFromPolicy, only overrides the default when it is not 0) is the
weight ``InterPodAffinityPriority`` gives an existing pod's *required* affinity term that
matches the incoming pod.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import yaml

from berthmaster.foundation.documents import safe_load
from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.plugins.base import Predicate, Priority
from berthmaster.scheduler.plugins.inter_pod_affinity import InterPodAffinityPriority
from berthmaster.scheduler.plugins.registry import (
    CONFIGURABLE_BY_NAME,
    CONFIGURABLE_PREDICATES,
    CONFIGURABLE_PRIORITIES,
    MANDATORY_PREDICATES,
    PREDICATE_ORDER,
    PREDICATES,
    PRIORITIES,
)

_ELISION = re.compile(r"^\s*\.\.\.\s*$", re.MULTILINE)
_TOP_FIELDS = {"kind", "apiVersion", "version", "predicates", "priorities",
               "hardPodAffinitySymmetricWeight", "alwaysCheckAllPredicates", "extenders"}
_ARG_FIELDS = {
    "serviceAffinity": {"labels"},
    "labelsPresence": {"labels", "presence"},
    "serviceAntiAffinity": {"label"},
    "labelPreference": {"label", "presence"},
}


def _invalid(source: str, problems: list[str]) -> PolicyError:
    return PolicyError(source, problems, document="scheduler policy")


@dataclass(frozen=True)
class Extension:
    """A plugin enabled at points beyond filtering and scoring (QueueSort, PostFilter,
    Reserve, Permit, PreBind, Bind, PostBind: ``points``, as a profile names them), by name.
    ``lifecycle``: the plugin's :class:`~berthmaster.scheduler.framework.Lifecycle` class,
    None for the ones the daemon provides itself (VolumeBinding's Reserve and PreBind,
    DefaultBinder); ``args``: its parsed ``pluginConfig`` arguments."""

    name: str
    points: frozenset[str]
    lifecycle: type[Any] | None = None
    args: Mapping[str, Any] | None = None


# What a Policy file runs after the decision (VolumeBinding is mandatory there, see above)
DEFAULT_EXTENSIONS: tuple[Extension, ...] = (
    Extension("VolumeBinding", frozenset(("reserve", "preBind"))),
    Extension("DefaultBinder", frozenset(("bind",))),
)


@dataclass(frozen=True)
class Policy:
    predicates: tuple[Predicate, ...]
    priorities: tuple[Priority, ...]
    source: str = "<policy>"
    always_check_all_predicates: bool = False
    hard_pod_affinity_weight: int = 1
    # a profile's settings (a KubeSchedulerConfiguration's; a Policy file has the defaults)
    scheduler_name: str = "berthmaster"
    percentage_of_nodes_to_score: int | None = None  # None: the configuration's
    preemption: bool = True  # DefaultPreemption at PostFilter
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    bind_timeout_seconds: int = 600
    extensions: tuple[Extension, ...] = DEFAULT_EXTENSIONS
    # per point, the extensions' names in the profile's order there (default: as listed)
    point_order: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the kinds the profile's plugins need watched (framework.Watched)
    watches: tuple[Any, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {
            "predicates": [p.name if p.name == p.NAME else f"{p.name} ({p.NAME})"
                           for p in self.predicates],
            "priorities": [{"name": p.name, "rule": p.NAME, "weight": p.weight}
                           for p in self.priorities],
        }


def _known(names: Mapping[str, Any], configurable: Mapping[str, Any]) -> str:
    static = sorted(n for n in names if n not in CONFIGURABLE_BY_NAME)
    return ", ".join(static) + "; configurable (any name, with an argument): " + \
        ", ".join(sorted(configurable))


def _argument(kind: str, where: str, arg: Any, allowed: Mapping[str, Any],
              problems: Problems) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(arg, Mapping):
        problems.add(f"{where}.argument", "must be an object with one of "
                     f"{', '.join(sorted(allowed))}")
        return None
    keys = [k for k in arg if arg[k] is not None]
    known = [k for k in keys if k in allowed]
    for k in keys:
        if k not in allowed:
            other = "priority" if kind == "predicate" else "predicate"
            hint = f" ({k} is a {other} argument)" if k in _ARG_FIELDS else ""
            problems.add(f"{where}.argument.{k}", f"unknown {kind} argument{hint}; use one of "
                         f"{', '.join(sorted(allowed))}")
    if len(known) > 1:
        problems.add(f"{where}.argument", f"conflicting arguments {', '.join(known)}; "
                     "give exactly one per entry")
        return None
    if not known:
        if not keys:
            problems.add(f"{where}.argument", f"empty; give one of {', '.join(sorted(allowed))}")
        return None
    key = known[0]
    body = arg[key]
    if not isinstance(body, Mapping):
        problems.add(f"{where}.argument.{key}", "must be an object")
        return None
    for field in body:
        if field not in _ARG_FIELDS[key]:
            problems.add(f"{where}.argument.{key}.{field}", "unknown field; expected "
                         f"{', '.join(sorted(_ARG_FIELDS[key]))}")
    here = f"{where}.argument.{key}"
    out: dict[str, Any] = {}
    if key in ("serviceAffinity", "labelsPresence"):
        labels = body.get("labels")
        if not isinstance(labels, list) or not labels or \
                not all(isinstance(x, str) and x for x in labels):
            problems.add(f"{here}.labels", "required, a non-empty list of label keys")
        else:
            out["labels"] = list(labels)
    if key in ("serviceAntiAffinity", "labelPreference"):
        label = body.get("label")
        if isinstance(label, list) and len(label) == 1:
            label = label[0]  # the documented template writes label: ["<label>"]
        if not isinstance(label, str) or not label:
            problems.add(f"{here}.label", "required, one label key")
        else:
            out["label"] = label
    if key in ("labelsPresence", "labelPreference"):
        presence = body.get("presence", False)
        if not isinstance(presence, bool):
            problems.add(f"{here}.presence", "must be true or false")
        else:
            out["presence"] = presence
    return key, out


def _entries(kind: str, raw: Any, problems: Problems) -> list[Any]:
    field = f"{kind}s" if kind == "predicate" else "priorities"
    if not isinstance(raw, list):
        problems.add(field, "must be a list of entries")
        return []
    static: Mapping[str, Any] = PREDICATES if kind == "predicate" else PRIORITIES
    configurable: Mapping[str, Any] = CONFIGURABLE_PREDICATES if kind == "predicate" \
        else CONFIGURABLE_PRIORITIES
    seen: dict[str, str] = {}
    out: list[Any] = []
    for i, entry in enumerate(raw):
        where = f"{field}[{i}]"
        if not isinstance(entry, Mapping):
            problems.add(where, "must be an object with a name")
            continue
        allowed_fields = {"name", "argument"} | ({"weight"} if kind == "priority" else set())
        for f in entry:
            if f not in allowed_fields:
                problems.add(f"{where}.{f}", "unknown field; expected "
                             f"{', '.join(sorted(allowed_fields))}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.add(f"{where}.name", "required")
            continue
        if name in seen:
            problems.add(f"{where}.name", f"duplicate name {name!r} (also {seen[name]}); "
                         "give each entry its own name")
        seen[name] = where
        weight = 1
        if kind == "priority":
            w = entry.get("weight")
            if w is None:
                problems.add(f"{where}.weight", "required, a positive integer")
            elif isinstance(w, bool) or not isinstance(w, int) or w <= 0:
                problems.add(f"{where}.weight", f"{w!r} must be a positive integer "
                             "(0 and negative weights are not allowed)")
            else:
                weight = w
        arg = entry.get("argument")
        cls: Any = None
        kwargs: dict[str, Any] = {}
        if arg is not None:
            parsed = _argument(kind, where, arg, configurable, problems)
            if parsed is None:
                continue
            key, kwargs = parsed
            cls = configurable[key]
            wanted = CONFIGURABLE_BY_NAME.get(name)
            if wanted is not None and wanted != key:
                problems.add(where, f"{name} takes the {wanted} argument, not {key}")
                continue
        elif name in CONFIGURABLE_BY_NAME:
            problems.add(f"{where}.argument", f"{name} needs its {CONFIGURABLE_BY_NAME[name]} "
                         "argument")
            continue
        elif name in static:
            cls = static[name]
        else:
            problems.add(f"{where}.name", f"unknown {kind} {name!r}; known: "
                         f"{_known(static, configurable)}")
            continue
        if kind == "priority":
            kwargs["weight"] = weight
        if len(kwargs) != len({k for k in kwargs if k}):
            continue
        out.append((i, cls, name, kwargs))
    return out


def decode_policy(text: str, source: str = "<policy>") -> Mapping[str, Any]:
    """The Policy document of ``text`` (JSON or YAML, the samples' ``...`` lines dropped),
    not yet validated; raise PolicyError when it is not an object."""
    try:
        doc = json.loads(text)
    except ValueError:
        try:
            doc = safe_load(_ELISION.sub("", text))
        except yaml.YAMLError as exc:
            raise _invalid(source, [f"not JSON or YAML: {exc}"]) from None
    if not isinstance(doc, Mapping):
        raise _invalid(source, ["the policy must be an object with kind: Policy"])
    return doc


def load_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse and validate a Policy (JSON or YAML); raise PolicyError listing every problem."""
    return policy_from_document(decode_policy(text, source), source)


def policy_from_document(doc: Mapping[str, Any], source: str = "<policy>") -> Policy:
    """Validate a decoded Policy document (:func:`decode_policy`); raise PolicyError listing
    every problem."""
    problems = Problems()
    if doc.get("kind") != "Policy":
        problems.add("kind", f"must be 'Policy' (got {doc.get('kind')!r})")
    version = doc.get("apiVersion", doc.get("version"))
    if version is not None and version != "v1":
        problems.add("apiVersion", f"must be 'v1' (got {version!r})")
    for f in doc:
        if f not in _TOP_FIELDS:
            problems.add(f, f"unknown field; a Policy has {', '.join(sorted(_TOP_FIELDS))}")
    if doc.get("extenders"):
        problems.add("extenders", "scheduler extenders are not supported by berthmaster; "
                     "remove the field")
    weight = doc.get("hardPodAffinitySymmetricWeight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
        problems.add("hardPodAffinitySymmetricWeight", "must be an integer from 0 to 100")
        weight = 1
    check_all = doc.get("alwaysCheckAllPredicates", False)
    if not isinstance(check_all, bool):
        problems.add("alwaysCheckAllPredicates", "must be true or false")
        check_all = False
    default = _default_document()
    raw_predicates = doc["predicates"] if "predicates" in doc else default["predicates"]
    raw_priorities = doc["priorities"] if "priorities" in doc else default["priorities"]
    predicates = _entries("predicate", [] if raw_predicates is None else raw_predicates,
                          problems)
    priorities = _entries("priority", [] if raw_priorities is None else raw_priorities,
                          problems)
    if problems:
        raise _invalid(source, problems.lines())
    built_predicates: list[Predicate] = [cls(name=name, **kw) for _, cls, name, kw in predicates]
    for mandatory in MANDATORY_PREDICATES:
        if not any(type(p) is mandatory for p in built_predicates):
            built_predicates.append(mandatory())
    built_predicates.sort(key=lambda p: PREDICATE_ORDER.get(type(p), len(PREDICATE_ORDER)))
    built_priorities = [cls(name=name, **kw) for _, cls, name, kw in priorities]
    built_priorities = [replace(p, hard_pod_affinity_weight=weight or 1)
                        if isinstance(p, InterPodAffinityPriority) else p
                        for p in built_priorities]
    return Policy(tuple(built_predicates), tuple(built_priorities), source, check_all, weight)


def _default_text() -> str:
    return (resources.files("berthmaster.scheduler") / "data" / "default-policy.json") \
        .read_text(encoding="utf-8")


def _default_document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_default_text())
    return doc


def default_policy() -> Policy:
    """The default policy (scheduler/data/default-policy.json), used without a policy file."""
    return load_policy(_default_text(), "default policy")
