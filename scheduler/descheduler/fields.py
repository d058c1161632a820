"""Reading policy fields: the parsers every strategy shares.

Design: validation never stops at the first mistake. Each parser takes the foundation's
:class:`~berthmaster.foundation.problems.Problems` and the field's path
(``profiles[0].pluginConfig[1].args.thresholds``), records every problem it sees as a sentence
naming that path and the fix, and returns a usable default so the caller can go on checking the
rest. :func:`raise_if_any` turns the list into one :class:`PolicyError` at the end. Sentences
reuse upstream descheduler's wording where it has one ("only one of Include/Exclude namespaces
can be set").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.model import SELECTOR_OPERATORS


def invalid_policy(source: str, problems: list[str]) -> PolicyError:
    """The descheduler's :class:`~berthmaster.foundation.errors.PolicyError`."""
    return PolicyError(source, problems, document="descheduler policy")


def raise_if_any(problems: Problems, source: str = "<policy>") -> None:
    """The :func:`invalid_policy` error of everything ``problems`` found, if anything."""
    if problems:
        raise invalid_policy(source, problems.lines())


@dataclass(frozen=True)
class Namespaces:
    """``namespaces: {include: [...], exclude: [...]}``; at most one of the two is set."""

    include: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()

    def admits(self, namespace: str) -> bool:
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude



@dataclass(frozen=True)
class PodFilter:
    """A strategy's ``namespaces`` and ``labelSelector``, the selector compiled once."""

    namespaces: Namespaces | None = None
    label_selector: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        from berthmaster.scheduler.model import label_selector as compile_selector

        object.__setattr__(self, "_compiled", compile_selector(self.label_selector,
                                                               none_matches=True))
        # most strategies filter nothing, and every pod of a pass is asked about
        object.__setattr__(self, "_everything",
                           self.namespaces is None and self.label_selector is None)

    def admits(self, pod: Mapping[str, Any]) -> bool:
        if self._everything:  # type: ignore[attr-defined]
            return True
        meta = pod.get("metadata") or {}
        if self.namespaces is not None and not self.namespaces.admits(meta.get("namespace", "")):
            return False
        return bool(self._compiled.matches(meta.get("labels") or {}))  # type: ignore[attr-defined]


EVERY_POD = PodFilter()


def join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def check_known(
    args: Mapping[str, Any], known: Iterable[str], where: str, problems: Problems
) -> None:
    """Report keys a strategy does not understand (typos would otherwise be silently ignored)."""
    allowed = set(known)
    for key in args:
        if key not in allowed:
            problems.add(join(where, key), f"unknown field; expected one of {sorted(allowed)}")


def mapping(value: Any, where: str, problems: Problems) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(where, f"must be a mapping, got {type(value).__name__}")
        return {}
    return value


def items(value: Any, where: str, problems: Problems, what: str = "a list") -> list[Any]:
    """A list field (absent or null: empty); anything else is a problem saying ``must be``
    ``what``, and reads as empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(where, f"must be {what}")
        return []
    return value


def boolean(value: Any, where: str, problems: Problems, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.add(where, f"must be true or false, got {value!r}")
        return default
    return value


def integer(
    value: Any, where: str, problems: Problems, default: int | None = None,
    minimum: int | None = None,
) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(where, f"must be an integer, got {value!r}")
        return default
    if minimum is not None and value < minimum:
        problems.add(where, f"must be at least {minimum}, got {value}")
        return default
    return value


def number(value: Any, where: str, problems: Problems) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(where, f"must be a number, got {value!r}")
        return None
    return float(value)


def strings(value: Any, where: str, problems: Problems) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(where, f"must be a list of strings, got {value!r}")
        return ()
    return tuple(value)


def include_exclude(value: Any, where: str, problems: Problems, what: str,
                    exclude_only: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An ``{include: [...], exclude: [...]}`` field (namespaces, owner kinds), worded as
    upstream's validation ("only one of Include/Exclude namespaces can be set")."""
    raw = mapping(value, where, problems)
    check_known(raw, ("include", "exclude"), where, problems)
    include = strings(raw.get("include"), join(where, "include"), problems)
    exclude = strings(raw.get("exclude"), join(where, "exclude"), problems)
    if exclude_only and include:
        problems.add(where, f"only Exclude {what} can be set, inclusion is not supported")
        include = ()
    elif include and exclude:
        problems.add(where, f"only one of Include/Exclude {what} can be set")
    return include, exclude


def namespaces(
    value: Any, where: str, problems: Problems, exclude_only: bool = False
) -> Namespaces:
    include, exclude = include_exclude(value, where, problems, "namespaces", exclude_only)
    return Namespaces(frozenset(include), frozenset(exclude))




def label_selector(value: Any, where: str, problems: Problems) -> dict[str, Any] | None:
    """A metav1.LabelSelector, checked for shape; ``None`` when absent (matches everything)."""
    if value is None:
        return None
    raw = mapping(value, where, problems)
    check_known(raw, ("matchLabels", "matchExpressions"), where, problems)
    labels = mapping(raw.get("matchLabels"), join(where, "matchLabels"), problems)
    for key, val in labels.items():
        if not isinstance(val, str):
            problems.add(join(join(where, "matchLabels"), key), f"must be a string, got {val!r}")
    expressions = items(raw.get("matchExpressions"), join(where, "matchExpressions"), problems)
    for i, expression in enumerate(expressions):
        at = join(join(where, "matchExpressions"), i)
        expr = mapping(expression, at, problems)
        operator = expr.get("operator")
        values = expr.get("values") or []
        if not isinstance(expr.get("key"), str) or not expr.get("key"):
            problems.add(join(at, "key"), "must be a non-empty string")
        if operator not in SELECTOR_OPERATORS:
            problems.add(join(at, "operator"),
                         f"must be one of {list(SELECTOR_OPERATORS)}, got {operator!r}")
        elif operator in ("In", "NotIn") and not values:
            problems.add(join(at, "values"), f"must be non-empty for operator {operator}")
        elif operator in ("Exists", "DoesNotExist") and values:
            problems.add(join(at, "values"), f"must be empty for operator {operator}")
    return dict(raw)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics, by the placement model's matcher (absent: everything)."""
    from berthmaster.scheduler.model import label_selector as compile_selector

    return compile_selector(selector, none_matches=True).matches(labels)
