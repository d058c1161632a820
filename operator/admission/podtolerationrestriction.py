"""PodTolerationRestriction, as pure decisions over tolerations as the API serves them.

Upstream (plugin/pkg/admission/podtolerationrestriction/admission.go ``Admit``/``Validate``/
``extractNSTolerations``, and pkg/util/tolerations/tolerations.go ``MergeTolerations``/
``VerifyAgainstWhitelist``/``isSuperset``):

- on create, the namespace's ``scheduler.alpha.kubernetes.io/defaultTolerations`` (a JSON list;
  the cluster's ``default`` when the annotation is absent, none when it is empty) are merged
  into the pod's tolerations; on create and update a pod that is not BestEffort also gets
  ``node.kubernetes.io/memory-pressure:NoSchedule`` (Exists);
- merging keeps one toleration of each pair where one tolerates everything the other does
  (the broader wins; of two equal ones, the first);
- a pod with tolerations must have each covered by one entry of the namespace's
  ``scheduler.alpha.kubernetes.io/tolerationsWhitelist`` (the cluster's ``whitelist`` when the
  annotation is absent; an empty list allows everything), else it is refused with upstream's
  sentence naming which whitelist.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.descheduler.protection import qos_class

NAME = "PodTolerationRestriction"
DEFAULT_TOLERATIONS = "scheduler.alpha.kubernetes.io/defaultTolerations"
TOLERATIONS_WHITELIST = "scheduler.alpha.kubernetes.io/tolerationsWhitelist"
MEMORY_PRESSURE_TOLERATION = {"key": "node.kubernetes.io/memory-pressure",
                              "operator": "Exists", "effect": "NoSchedule"}
WHITELIST_CONFLICT = ("pod tolerations (possibly merged with namespace default tolerations) "
                      "conflict with its {scope} whitelist")

Toleration = Mapping[str, Any]
Identity = tuple[str, str, str, str, int | None]  # key, operator, value, effect, seconds


class TolerationsAnnotationError(ValueError):
    """A namespace annotation that is not a JSON list of tolerations."""


@dataclass(frozen=True)
class Settings:
    """The plugin's ``Configuration`` (podtolerationrestriction.admission.k8s.io/v1alpha1):
    cluster-wide ``default`` and ``whitelist``."""

    default: Sequence[Toleration] = field(default_factory=list)
    whitelist: Sequence[Toleration] = field(default_factory=list)


def _fields(toleration: Toleration) -> Identity:
    seconds = toleration.get("tolerationSeconds")
    return (str(toleration.get("key") or ""), str(toleration.get("operator") or ""),
            str(toleration.get("value") or ""), str(toleration.get("effect") or ""),
            None if seconds is None else int(seconds))


def is_superset(broad: Toleration, narrow: Toleration) -> bool:
    """Whether ``broad`` tolerates everything ``narrow`` does (upstream's isSuperset: an empty
    operator counts as Equal only for ``broad``; NoExecute seconds must not grow)."""
    b_key, b_op, b_value, b_effect, b_seconds = _fields(broad)
    n_key, n_op, n_value, n_effect, n_seconds = _fields(narrow)
    if _fields(broad) == _fields(narrow):
        return True
    if n_key != b_key and (b_key != "" or b_op != "Exists"):
        return False
    if n_effect != b_effect and b_effect != "":
        return False
    if b_effect == "NoExecute" and b_seconds is not None and (
            n_seconds is None or n_seconds > b_seconds):
        return False
    if b_op in ("Equal", ""):
        return n_op == "Equal" and n_value == b_value
    return b_op == "Exists"


# The linear-time merge. isSuperset(broad, narrow) can only hold when ``broad`` sits in one of
# a handful of buckets determined by ``narrow`` alone: an Exists toleration of the same key (or
# of the empty key, which matches every key) and of the same effect (or of the empty one), or
# an Equal toleration of the same key, value and effect (or empty effect) when ``narrow`` is
# Equal. Inside a bucket the only condition left is NoExecute's tolerationSeconds, so a bucket
# keeps how many broad tolerations cover unconditionally and the longest seconds of the ones
# that do not, each per identity (so "another toleration than this very one" is answerable).

Bucket = tuple[str, ...]


def _bucket(toleration: Identity) -> Bucket | None:
    """Where ``toleration`` sits as a possible superset; None: it covers only its equals."""
    key, operator, value, effect, _ = toleration
    if operator == "Exists":
        return ("Exists", key, effect)
    if operator in ("Equal", ""):
        return ("Equal", key, effect, value)
    return None


def _buckets_covering(toleration: Identity) -> set[Bucket]:
    """Every bucket whose members may be supersets of ``toleration``."""
    key, operator, value, effect, _ = toleration
    buckets: set[Bucket] = {("Exists", k, e) for k in (key, "") for e in (effect, "")}
    if operator == "Equal":
        buckets |= {("Equal", key, e, value) for e in (effect, "")}
    return buckets


def _limit(toleration: Identity) -> int | None:
    """The tolerationSeconds a narrower toleration must not exceed; None: no condition."""
    _, _, _, effect, seconds = toleration
    return seconds if effect == "NoExecute" else None


class _Group:
    """The tolerations of one bucket: per identity, how many cover unconditionally and the
    two identities with the longest NoExecute seconds."""

    __slots__ = ("by_identity", "longest", "unconditional")

    def __init__(self) -> None:
        self.unconditional = 0
        self.by_identity: dict[Identity, int] = {}
        self.longest: list[tuple[int, Identity]] = []  # at most two, distinct identities

    def add(self, toleration: Identity) -> None:
        limit = _limit(toleration)
        if limit is None:
            self.unconditional += 1
            self.by_identity[toleration] = self.by_identity.get(toleration, 0) + 1
            return
        entries = [e for e in self.longest if e[1] != toleration]
        previous = max((e[0] for e in self.longest if e[1] == toleration), default=limit)
        entries.append((max(previous, limit), toleration))
        self.longest = sorted(entries, reverse=True)[:2]

    def covers(self, narrow: Identity, except_identity: Identity | None) -> bool:
        """Whether a member (other than ``except_identity``'s copies) is a superset of
        ``narrow``, given the bucket already matches its key, operator, value and effect."""
        others = self.unconditional - self.by_identity.get(except_identity, 0) \
            if except_identity is not None else self.unconditional
        if others > 0:
            return True
        seconds = narrow[4]
        if seconds is None:
            return False
        return any(limit >= seconds for limit, identity in self.longest
                   if identity != except_identity)


class _Index:
    def __init__(self) -> None:
        self.groups: dict[Bucket, _Group] = {}
        self.identities: set[Identity] = set()

    def add(self, toleration: Identity) -> None:
        self.identities.add(toleration)
        bucket = _bucket(toleration)
        if bucket is not None:
            self.groups.setdefault(bucket, _Group()).add(toleration)

    def covers(self, narrow: Identity, except_identity: Identity | None = None) -> bool:
        """Whether a member is a superset of ``narrow``; with ``except_identity``, a member
        that is not equal to it (upstream's "unless equal" in MergeTolerations)."""
        if except_identity is None and narrow in self.identities:
            return True
        return any(group.covers(narrow, except_identity)
                   for bucket in _buckets_covering(narrow)
                   if (group := self.groups.get(bucket)) is not None)


def merge_tolerations(first: Sequence[Toleration], second: Sequence[Toleration]
                      ) -> list[Toleration]:
    """Both lists in order, without a toleration that another one covers (upstream's
    MergeTolerations: one kept of equal ones, the first; a toleration dropped when a kept one
    before it or a different one after it covers it), in time linear in the lists' length."""
    everything = [*first, *second]
    identities = [_fields(t) for t in everything]
    later: list[bool] = [False] * len(everything)
    after = _Index()
    for index in range(len(everything) - 1, -1, -1):
        later[index] = after.covers(identities[index], except_identity=identities[index])
        after.add(identities[index])
    kept = _Index()
    merged: list[Toleration] = []
    for index, toleration in enumerate(everything):
        if later[index] or kept.covers(identities[index]):
            continue
        kept.add(identities[index])
        merged.append(toleration)
    return merged


def verify_against_whitelist(tolerations: Sequence[Toleration],
                             whitelist: Sequence[Toleration]) -> bool:
    """Every toleration is covered by an entry of the whitelist (an empty one allows all)."""
    if not whitelist or not tolerations:
        return True
    allowed = _Index()
    for entry in whitelist:
        allowed.add(_fields(entry))
    return all(allowed.covers(_fields(t)) for t in tolerations)


def namespace_tolerations(annotations: Mapping[str, str], key: str) -> list[Toleration] | None:
    """The annotation's tolerations; None when absent, [] when empty (upstream's
    extractNSTolerations). Raises :class:`TolerationsAnnotationError` when malformed."""
    if key not in annotations:
        return None
    text = annotations[key]
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError as error:
        raise TolerationsAnnotationError(
            f"the namespace annotation {key} is not JSON ({error})") from error
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise TolerationsAnnotationError(
            f"the namespace annotation {key} must be a JSON list of tolerations")
    for index, toleration in enumerate(value):
        problem = toleration_problem(toleration)
        if problem:
            raise TolerationsAnnotationError(
                f"the namespace annotation {key}: toleration {index} {problem}")
    return value


def toleration_problem(toleration: Mapping[str, Any]) -> str | None:
    """Why a toleration is not one (a wrong type or value), in a phrase; None when it is."""
    unknown = sorted(set(toleration) - {"key", "operator", "value", "effect",
                                        "tolerationSeconds"})
    if unknown:
        return f"has unknown field(s) {', '.join(unknown)}"
    for name in ("key", "operator", "value", "effect"):
        if not isinstance(toleration.get(name, ""), str):
            return f"has a {name} that is not a string"
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        return "has a tolerationSeconds that is not an integer"
    if toleration.get("operator", "") not in ("", "Equal", "Exists"):
        return "has operator {!r}; use Equal or Exists".format(toleration["operator"])
    if toleration.get("effect", "") not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        return "has effect {!r}; use NoSchedule, PreferNoSchedule or NoExecute".format(
            toleration["effect"])
    if toleration.get("operator") == "Exists" and toleration.get("value"):
        return "has a value with operator Exists (Exists takes no value)"
    if not toleration.get("key") and toleration.get("operator", "") != "Exists":
        return "has no key, which only operator Exists allows"
    return None


def is_best_effort(pod: Mapping[str, Any]) -> bool:
    return qos_class(pod) == "BestEffort"


@dataclass(frozen=True)
class Outcome:
    """The pod's new tolerations (None: unchanged) or the refusal reason."""

    tolerations: list[Toleration] | None = None
    refusal: str | None = None


def admit(pod: Mapping[str, Any], operation: str, annotations: Mapping[str, str],
          settings: Settings) -> Outcome:
    """The mutating pass, then :func:`validate` on the result."""
    current = list((pod.get("spec") or {}).get("tolerations") or [])
    extra: list[Toleration] = []
    if operation == "CREATE":
        defaults = namespace_tolerations(annotations, DEFAULT_TOLERATIONS)
        extra = list(settings.default if defaults is None else defaults)
    if not is_best_effort(pod):
        extra.append(dict(MEMORY_PRESSURE_TOLERATION))
    merged = merge_tolerations(current, extra) if extra else current
    refusal = validate(merged, annotations, settings)
    if refusal:
        return Outcome(refusal=refusal)
    return Outcome(tolerations=merged if merged != current else None)


def validate(tolerations: Sequence[Toleration], annotations: Mapping[str, str],
             settings: Settings) -> str | None:
    """The whitelist check: the namespace's whitelist, else the cluster's."""
    if not tolerations:
        return None
    whitelist = namespace_tolerations(annotations, TOLERATIONS_WHITELIST)
    scope = "namespace"
    if whitelist is None:
        whitelist, scope = list(settings.whitelist), "cluster"
    if whitelist and not verify_against_whitelist(tolerations, whitelist):
        return WHITELIST_CONFLICT.format(scope=scope)
    return None
