"""Expanders: which scale-up option (MachineSet, node count, pods helped) wins.

Design: as upstream, each expander is a filter from options to the best options; the configured
expanders run in order, each narrowing the previous one's result, and a tie left at the end is
broken at random (upstream's fallback). ``LeastWaste`` keeps the options leaving the least idle
CPU plus memory (as fractions of what is added), ``MostPods`` those helping the most pods,
``Priority`` those whose node group id matches the highest priority in the
``cluster-autoscaler-priority-expander`` ConfigMap, ``Random`` one at random. As upstream's
priority expander (expander/priority ``groupIDMatchesList``), a pattern matches when it is found
anywhere in the id (an unanchored search), and the id is the Cluster API provider's
``MachineSet/<namespace>/<name>``.

The Priority expander's ConfigMap (cluster-autoscaler expander/priority/priority.go):
- it is read only from the operator's own namespace (:func:`read_priorities` is given it), as
  upstream's lister is a ``ConfigMapNamespaceLister`` on its ``--namespace``: anyone who may
  write a ConfigMap of that name in some other namespace steers nothing;
- its patterns are compiled with RE2 (``google-re2``), the engine of upstream's Go ``regexp``:
  matching takes time linear in the id whatever the pattern, so ``(.+)+X`` cannot stall the
  loop as it would in Python's backtracking ``re``, and a pattern RE2 refuses (a lookaround, a
  backreference, a repetition past 1000) is refused as Go refuses it;
- a ConfigMap that cannot be used (no ``priorities`` key, empty, YAML that is not a map of
  integer priorities to lists of patterns, a pattern that does not compile) never stops the
  loop: :func:`read_priorities` returns no priorities and the problem, upstream's texts, which
  the loop posts as a Warning event; with no priorities the Priority expander keeps every
  option, so the next expander in ``spec.expanders`` (or the final random choice) decides.
  Upstream's ``BestOptions`` returns no option at all then, which stops that scale-up.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import re2
import yaml

from berthmaster.operator.autoscaler.groups import NodeGroup
from berthmaster.operator.autoscaler.resources import CPU, MEMORY, node_allocatable, pod_requests

JSON = dict[str, Any]
# upstream's PriorityConfigMapName and ConfigMapKey (expander/priority/priority.go)
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"
PRIORITY_KEY = "priorities"


class Pattern(Protocol):
    """A compiled RE2 pattern (``re2.compile``); only its unanchored search is used."""

    def search(self, text: str) -> object | None: ...


@dataclass(frozen=True)
class Option:
    group: NodeGroup
    node_count: int
    pods: tuple[JSON, ...]
    template: JSON


Priorities = Mapping[int, Sequence[Pattern]]
Expander = Callable[[list[Option], random.Random, Priorities], list[Option]]

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr


class PriorityConfigError(ValueError):
    """The ``priorities`` text cannot be used; the message is upstream's wording."""


class PriorityKeyMissing(PriorityConfigError):
    """The ConfigMap has no ``priorities`` key."""


def compile_pattern(pattern: str) -> Pattern:
    """``pattern`` compiled by RE2; :class:`re2.error` when RE2 refuses it."""
    compiled: Pattern = re2.compile(pattern, options=_RE2_OPTIONS)
    return compiled


def _re2_reason(error: Exception) -> str:
    reason = error.args[0] if error.args else error
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def _priority(key: Any) -> int:
    if isinstance(key, bool):
        raise ValueError(key)
    if isinstance(key, int):
        return key
    text = str(key).strip()
    if not text.lstrip("+-").isdigit():
        raise ValueError(key)
    return int(text)


def parse_priorities(data: Mapping[str, str] | None) -> dict[int, list[Pattern]]:
    """The ``priorities`` key of the priority expander ConfigMap, ``{priority: [regex, ...]}``,
    compiled; :class:`PriorityConfigError` (upstream's texts) when it cannot be used."""
    data = data or {}
    if PRIORITY_KEY not in data:
        raise PriorityKeyMissing(f"Wrong configmap for priority expander, doesn't contain "
                                 f"{PRIORITY_KEY} key")
    text = data.get(PRIORITY_KEY) or ""
    if not text.strip():
        raise PriorityConfigError(f"priority configuration in {PRIORITY_CONFIGMAP} configmap "
                                  "is empty; please provide valid configuration")
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PriorityConfigError("Can't parse YAML with priorities in the configmap: "
                                  f"{' '.join(str(error).split())}") from error
    if not isinstance(loaded, Mapping):
        raise PriorityConfigError("Can't parse YAML with priorities in the configmap: expected "
                                  "a map of integer priorities to lists of node group id "
                                  f"regexes, got {type(loaded).__name__}")
    result: dict[int, list[Pattern]] = {}
    for key, patterns in loaded.items():
        try:
            priority = _priority(key)
        except ValueError:
            raise PriorityConfigError("Can't parse YAML with priorities in the configmap: "
                                      f"priority {key!r} is not an integer") from None
        if patterns is None:
            patterns = []
        if not isinstance(patterns, list) or any(isinstance(p, (Mapping, list)) or p is None
                                                 for p in patterns):
            raise PriorityConfigError("Can't parse YAML with priorities in the configmap: "
                                      f"priority {priority}: expected a list of regexes, got "
                                      f"{patterns!r}")
        compiled = result.setdefault(priority, [])
        for pattern in patterns:
            rule = str(pattern)
            try:
                compiled.append(compile_pattern(rule))
            except re2.error as error:
                raise PriorityConfigError(f"Can't compile regexp rule for priority {priority} "
                                          f"and rule {rule}: {_re2_reason(error)}") from None
    return result


@dataclass(frozen=True)
class PriorityReading:
    """What the loop gets from the ConfigMap: the priorities, or why there are none."""

    priorities: dict[int, list[Pattern]] = field(default_factory=dict)
    problem: str | None = None  # the Warning event's message
    reason: str = ""  # the Warning event's reason


PRIORITY_CONFIGMAP_INVALID = "PriorityConfigMapInvalid"  # upstream's event reason
PRIORITY_CONFIGMAP_NOT_FOUND = "PriorityConfigMapNotFound"
FALLBACK = ("the Priority expander keeps every option and the next expander in "
            "spec.expanders decides")


def read_priorities(configmap: Mapping[str, Any] | None, namespace: str) -> PriorityReading:
    """The Priority expander's configuration from its ConfigMap in ``namespace`` (the
    operator's); never raises (see the module docstring)."""
    where = f"ConfigMap {namespace}/{PRIORITY_CONFIGMAP}"
    if configmap is None:
        return PriorityReading(
            problem=f"Priority expander config map {PRIORITY_CONFIGMAP} not found in namespace "
                    f"{namespace} (the operator's namespace, the only one it is read from); "
                    f"{FALLBACK}",
            reason=PRIORITY_CONFIGMAP_NOT_FOUND)
    try:
        return PriorityReading(parse_priorities(configmap.get("data")))
    except PriorityKeyMissing as error:
        return PriorityReading(problem=f"{where}: {error}. Ignoring it: {FALLBACK}",
                               reason=PRIORITY_CONFIGMAP_INVALID)
    except PriorityConfigError as error:
        return PriorityReading(
            problem=f"{where} key {PRIORITY_KEY}: Wrong configuration for priority expander: "
                    f"{error}. Ignoring it: {FALLBACK}",
            reason=PRIORITY_CONFIGMAP_INVALID)


def waste(option: Option) -> float:
    allocatable = node_allocatable(option.template)
    score = 0.0
    for resource in (CPU, MEMORY):
        available = allocatable.get(resource, 0) * option.node_count
        if available <= 0:
            continue
        used = sum(pod_requests(pod).get(resource, 0) for pod in option.pods)
        score += (available - used) / available
    return score


def least_waste(options: list[Option], rng: random.Random, _: Priorities) -> list[Option]:
    scores = [(waste(o), o) for o in options]
    best = min(score for score, _ in scores)
    return [o for score, o in scores if abs(score - best) < 1e-9]


def most_pods(options: list[Option], rng: random.Random, _: Priorities) -> list[Option]:
    best = max(len(o.pods) for o in options)
    return [o for o in options if len(o.pods) == best]


def by_priority(options: list[Option], rng: random.Random, priorities: Priorities) -> list[Option]:
    ranked: dict[int, list[Option]] = {}
    for option in options:
        for priority, patterns in priorities.items():
            if any(p.search(option.group.upstream_id) for p in patterns):
                ranked.setdefault(priority, []).append(option)
    if not ranked:
        return options  # no MachineSet is listed: the priority expander has no opinion
    return ranked[max(ranked)]


def pick_random(options: list[Option], rng: random.Random, _: Priorities) -> list[Option]:
    return [rng.choice(options)]


EXPANDERS: dict[str, Expander] = {
    "LeastWaste": least_waste,
    "MostPods": most_pods,
    "Priority": by_priority,
    "Random": pick_random,
}


def best_option(options: list[Option], names: Sequence[str], rng: random.Random,
                priorities: Priorities | None = None) -> Option | None:
    remaining = sorted(options, key=lambda o: o.group.id)
    if not remaining:
        return None
    for name in names:
        remaining = EXPANDERS[name](remaining, rng, priorities or {})
        if len(remaining) == 1:
            return remaining[0]
    return rng.choice(remaining)
