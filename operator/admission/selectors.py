"""Node label selectors in the string form namespaces and the configuration carry
(``env=test,infra=fedora``), read as upstream's ``labels.ConvertSelectorToLabelsMap``
(k8s.io/apimachinery/pkg/labels/labels.go): comma-separated ``key=value`` pairs, each trimmed,
keys qualified names and values label values; the empty string is the empty map. Set
operations are upstream's ``labels.Conflicts`` and ``labels.Merge``.
"""

from __future__ import annotations

from collections.abc import Mapping

from berthmaster.scheduler.label_string import label_key_problem, label_value_problem


class SelectorError(ValueError):
    """A node selector string that upstream would not parse; the message says which pair."""


def selector_to_map(text: str) -> dict[str, str]:
    """``"a=1, b=2"`` -> ``{"a": "1", "b": "2"}``; :class:`SelectorError` when malformed."""
    result: dict[str, str] = {}
    if not text:
        return result
    for pair in text.split(","):
        parts = pair.split("=")
        if len(parts) != 2:
            raise SelectorError(f"invalid selector: {pair.strip()!r} is not key=value")
        key, value = parts[0].strip(), parts[1].strip()
        problem = label_key_problem(key)
        if problem:
            raise SelectorError(f"invalid selector: key {key!r}: {problem}")
        problem = label_value_problem(value)
        if problem:
            raise SelectorError(f"invalid selector: value {value!r} of {key!r}: {problem}")
        result[key] = value
    return result


def conflicts(first: Mapping[str, str], second: Mapping[str, str]) -> bool:
    """True when a key is in both with different values."""
    return any(key in second and second[key] != value for key, value in first.items())


def merge(first: Mapping[str, str], second: Mapping[str, str]) -> dict[str, str]:
    """``first`` overlaid with ``second`` (the second wins)."""
    return {**first, **second}


def is_subset(subset: Mapping[str, str], superset: Mapping[str, str]) -> bool:
    """Every pair of ``subset`` is in ``superset``; anything is a subset of an empty map (an
    empty whitelist allows everything, as upstream's podnodeselector isSubset)."""
    if not superset:
        return True
    return all(superset.get(key) == value for key, value in subset.items())
