"""Affinity terms indexed by the pod labels they could select, so a pod meets only its own.

The snapshot keeps every distinct affinity term of the assigned pods (``term_index``). Asking
"which existing terms select this incoming pod?" by matching every term costs one selector
match per distinct term and decision, which dominates the descheduler's nodeFit on a large
cluster. ``TermsBySelector`` files each term under one *anchor*, a requirement that any pod it
selects must satisfy:

- an ``In`` requirement (``matchLabels`` compile to these): the term sits under
  ``(key, value)`` for each of its values, and a pod reaches it through its own label ``key``;
- otherwise an ``Exists`` requirement: the term sits under ``key``;
- otherwise (an empty selector, or only ``NotIn``/``DoesNotExist``) it is always a candidate;
- a selector that matches nothing is not filed at all.

``candidates(labels)`` yields each term whose anchor the labels satisfy, at most once (a pod has
one value per key, and a term has one anchor). It is a sound pre-filter, never the verdict: the
caller still matches the whole selector and the term's namespaces, so upstream semantics are
untouched. Updates are O(values of the anchor); the index is not thread-safe, like the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from berthmaster.scheduler.model import AffinityTerm, LabelSelector

_ALWAYS = ""  # the anchor of terms that any labels may satisfy


def _anchor(selector: LabelSelector) -> tuple[str, str | None, frozenset[str]] | None:
    """(``"in"``, key, values), (``"exists"``, key, ∅), (``_ALWAYS``, None, ∅) or None."""
    if selector.matches_nothing:
        return None
    exists: str | None = None
    for r in selector.requirements:
        if r.operator == "In":
            return "in", r.key, r.values
        if r.operator == "Exists" and exists is None:
            exists = r.key
    if exists is not None:
        return "exists", exists, frozenset()
    return _ALWAYS, None, frozenset()


class TermsBySelector:
    """Distinct affinity terms filed by anchor; see the module docstring."""

    __slots__ = ("_always", "_by_key", "_by_label")

    def __init__(self) -> None:
        self._by_label: dict[str, dict[str, dict[AffinityTerm, None]]] = {}
        self._by_key: dict[str, dict[AffinityTerm, None]] = {}
        self._always: dict[AffinityTerm, None] = {}

    def add(self, term: AffinityTerm) -> None:
        anchor = _anchor(term.selector)
        if anchor is None:
            return
        kind, key, values = anchor
        if kind == "in":
            assert key is not None
            if not values:  # ``In`` with no values selects nothing
                return
            by_value = self._by_label.setdefault(key, {})
            for v in values:
                by_value.setdefault(v, {})[term] = None
        elif kind == "exists":
            assert key is not None
            self._by_key.setdefault(key, {})[term] = None
        else:
            self._always[term] = None

    def discard(self, term: AffinityTerm) -> None:
        anchor = _anchor(term.selector)
        if anchor is None:
            return
        kind, key, values = anchor
        if kind == "in":
            assert key is not None
            by_value = self._by_label.get(key)
            if by_value is None:
                return
            for v in values:
                bucket = by_value.get(v)
                if bucket is not None:
                    bucket.pop(term, None)
                    if not bucket:
                        del by_value[v]
            if not by_value:
                del self._by_label[key]
        elif kind == "exists":
            assert key is not None
            bucket = self._by_key.get(key)
            if bucket is not None:
                bucket.pop(term, None)
                if not bucket:
                    del self._by_key[key]
        else:
            self._always.pop(term, None)

    def candidates(self, labels: Mapping[str, str]) -> Iterator[AffinityTerm]:
        """Every filed term that a pod with ``labels`` might satisfy, each once."""
        yield from self._always
        by_label, by_key = self._by_label, self._by_key
        if not by_label and not by_key:
            return
        for key, value in labels.items():
            by_value = by_label.get(key)
            if by_value is not None:
                bucket = by_value.get(value)
                if bucket is not None:
                    yield from bucket
            keyed = by_key.get(key)
            if keyed is not None:
                yield from keyed

    def __len__(self) -> int:
        seen: set[AffinityTerm] = set(self._always)
        for bucket in self._by_key.values():
            seen.update(bucket)
        for by_value in self._by_label.values():
            for bucket in by_value.values():
                seen.update(bucket)
        return len(seen)
