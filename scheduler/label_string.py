"""The string form of a label selector (``kubectl -l``, a descheduler policy's ``nodeSelector``).

Design: the grammar and error sentences follow k8s.io/apimachinery/pkg/labels (selector.go:
Lexer, Parser, NewRequirement): comma-separated requirements, each ``key``, ``!key``,
``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``,
``key > 1`` or ``key < 1``. Keys must be qualified names and values valid label values. The
result is the placement model's :class:`~berthmaster.scheduler.model.LabelSelector`, so
matching is the one truth every other selector uses (``!=``/``notin`` match a missing key,
``>``/``<`` compare integers). An empty string selects everything.
"""

from __future__ import annotations

import re

from berthmaster.scheduler.model import LabelSelector, Requirement

_SPECIAL = "=!(),<>"
_TOKENS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "in": "in", "<": "<",
           "!=": "!=", "notin": "notin", "(": "("}
_ID, _END = "identifier", "end of string"
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")


class SelectorSyntaxError(ValueError):
    """The selector string cannot be parsed; the message says what was found and expected."""


def _lex(text: str) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    pos, size = 0, len(text)
    while True:
        while pos < size and text[pos] in " \t\r\n":
            pos += 1
        if pos >= size:
            items.append((_END, ""))
            return items
        if text[pos] in _SPECIAL:
            start, best, best_end = pos, "", pos
            while pos < size and text[pos] in _SPECIAL:
                pos += 1
                if text[start:pos] in _TOKENS:
                    best, best_end = text[start:pos], pos
                elif best:
                    break
            if not best:
                raise SelectorSyntaxError(
                    f"error expected: keyword found '{text[start:pos]}'")
            pos = best_end
            items.append((_TOKENS[best], best))
            continue
        start = pos
        while pos < size and text[pos] not in _SPECIAL and text[pos] not in " \t\r\n":
            pos += 1
        word = text[start:pos]
        items.append((_TOKENS.get(word, _ID), word))


def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "a qualified name must consist of an optional DNS subdomain prefix and a name"
    if key.endswith("/") or not name:
        return "name part must be non-empty"
    if len(name) > 63 or not _NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (at most 63 characters)")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _NAME.match(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (at most "
                "63 characters)")
    return None


class _Parser:
    def __init__(self, text: str):
        self.items = _lex(text)
        self.position = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        return self._as(self.items[self.position], values)

    def take(self, values: bool = True) -> tuple[str, str]:
        self.position += 1
        return self._as(self.items[self.position - 1], values)

    @staticmethod
    def _as(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # in value context, 'in' and 'notin' are plain identifiers
        if values and item[0] in ("in", "notin"):
            return _ID, item[1]
        return item

    def parse(self) -> list[Requirement]:
        found: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok == _END:
                return found
            if tok not in (_ID, "!"):
                raise SelectorSyntaxError(
                    f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                found.append(self.requirement())
            except SelectorSyntaxError as error:
                raise SelectorSyntaxError(f"unable to parse requirement: {error}") from None
            tok, lit = self.take()
            if tok == _END:
                return found
            if tok != ",":
                raise SelectorSyntaxError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.peek()
            if tok not in (_ID, "!"):
                raise SelectorSyntaxError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        tok, key = self.take()
        absent = tok == "!"
        if absent:
            tok, key = self.take()
        if tok != _ID:
            raise SelectorSyntaxError(f"found '{key}', expected: identifier")
        problem = label_key_problem(key)
        if problem:
            raise SelectorSyntaxError(f"Invalid value: {key!r}: {problem}")
        if absent:  # whatever follows is the caller's to reject, as upstream's Parser does
            return Requirement(key, "DoesNotExist", frozenset())
        if self.peek()[0] in (_END, ","):
            return Requirement(key, "Exists", frozenset())
        tok, lit = self.take(values=False)
        if tok in ("in", "notin"):
            values = self.value_list()
            if not values:
                raise SelectorSyntaxError("for 'in', 'notin' operators, values set can't be "
                                          "empty")
            operator = "In" if tok == "in" else "NotIn"
        elif tok in ("=", "==", "!=", ">", "<"):
            values = self.exact_value()
            operator = {"=": "In", "==": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}[tok]
            if operator in ("Gt", "Lt") and not re.fullmatch(r"[-+]?\d+", next(iter(values))):
                raise SelectorSyntaxError("for 'Gt', 'Lt' operators, the value must be an "
                                          "integer")
        else:
            raise SelectorSyntaxError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")
        for value in sorted(values):
            problem = label_value_problem(value)
            if problem:
                raise SelectorSyntaxError(f"Invalid value: {value!r}: {problem}")
        return Requirement(key, operator, frozenset(values))

    def value_list(self) -> set[str]:
        tok, lit = self.take()
        if tok != "(":
            raise SelectorSyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == ")":
            self.take()
            return {""}
        if tok not in (_ID, ","):
            raise SelectorSyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == _ID:
                values.add(lit)
                following, lit2 = self.peek()
                if following == ")":
                    break
                if following != ",":
                    raise SelectorSyntaxError(f"found '{lit2}', expected: ',' or ')'")
            elif tok == ",":
                if not values:
                    values.add("")
                following, _ = self.peek()
                if following in (")", ","):
                    values.add("")
                if following == ")":
                    break
            else:
                raise SelectorSyntaxError(f"found '{lit}', expected: ',', or identifier")
        self.take()  # the ')'
        return values

    def exact_value(self) -> set[str]:
        tok, _ = self.peek()
        if tok in (_END, ","):
            return {""}
        tok, lit = self.take()
        if tok != _ID:
            raise SelectorSyntaxError(f"found '{lit}', expected: identifier")
        return {lit}


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``text`` as labels.Parse does; raises :class:`SelectorSyntaxError`."""
    return LabelSelector(tuple(_Parser(text or "").parse()))
