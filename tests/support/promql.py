"""The metric selectors a PromQL expression reads: which series names, with which label matchers.

Design: enough of PromQL's lexical structure to find every vector selector — a metric name,
optionally followed by ``{label matchers}`` — in the expressions of a dashboard or of alerting
rules, so a test can check each against what the components export. String literals are taken
out first (their content is matcher values or function arguments, never selectors); then range
and subquery brackets (``[5m]``, ``[$__rate_interval]``, ``[15m:1m]``), the label lists of
``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``, and the label matchers are
read; an identifier left standing that is neither a keyword, a function or aggregation (followed
by ``(``), nor a number is a metric name. A bare ``{...}`` selector without a name is refused:
no dashboard of ours should match every series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "offset", "bool", "inf", "nan", "atan2", "start", "end"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHER = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(\x00\d+\x00)\s*,?")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_TOKEN = re.compile(r"(?:\d+(?:ms|[smhdwy]))+(?![A-Za-z0-9_])|"  # a duration (offset 5m)
                    r"[A-Za-z_:][A-Za-z0-9_:]*|\{[^{}]*\}|\[[^\[\]]*\]|"
                    r"\d+(?:\.\d+)?(?:e[+-]?\d+)?|\$\{?\w+\}?|.", re.S)


@dataclass(frozen=True)
class Selector:
    name: str
    matchers: tuple[tuple[str, str, str], ...] = ()  # (label, operator, value)

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(label for label, _, _ in self.matchers)


class PromQLError(ValueError):
    pass


def selectors(expression: str) -> list[Selector]:
    """Every vector selector of ``expression``, in order."""
    strings: list[str] = []

    def hide(match: re.Match[str]) -> str:
        strings.append(match.group(0)[1:-1])
        return f"\x00{len(strings) - 1}\x00"

    text = _STRING.sub(hide, expression)
    text = _GROUPING.sub(" ", text)
    tokens = [t for t in _TOKEN.findall(text) if not t.isspace()]
    found: list[Selector] = []
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if token.startswith("{"):
            previous = tokens[index - 1] if index else ""
            if not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", previous) or previous in KEYWORDS:
                raise PromQLError(f"a selector without a metric name in {expression!r}")
            continue
        if not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", token):
            continue
        if token.lower() in KEYWORDS or following == "(":
            continue
        matchers: tuple[tuple[str, str, str], ...] = ()
        if following.startswith("{"):
            body = following[1:-1]
            parsed = []
            position = 0
            while position < len(body.strip()):
                match = _MATCHER.match(body, position)
                if match is None:
                    raise PromQLError(f"cannot read the matchers {following!r} of {token}")
                label, operator, placeholder = match.groups()
                parsed.append((label, operator, strings[int(placeholder.strip("\x00"))]))
                position = match.end()
            matchers = tuple(parsed)
        found.append(Selector(token, matchers))
    return found


def unscoped(expression: str, scope: dict[str, str],
             own_labels: dict[str, frozenset[str]] | None = None) -> list[str]:
    """What keeps ``expression`` from reading only one release's series: one line per vector
    selector lacking an ``=`` or ``=~`` matcher on a ``scope`` label with exactly its value
    (``{"job": "$job", "namespace": "$namespace"}``). A label the metric exports itself
    (``own_labels[name]``: e.g. a Machine's ``namespace``, which the ServiceMonitor's
    ``honorLabels`` keeps in place of the target's) cannot scope it and is not required."""
    problems = []
    for selector in selectors(expression):
        exempt = (own_labels or {}).get(selector.name, frozenset())
        for label, value in scope.items():
            if label in exempt:
                continue
            if not any(matcher == (label, op, value)
                       for matcher in selector.matchers for op in ("=", "=~")):
                problems.append(f"{selector.name} has no {label}={value!r} matcher "
                                f"in {expression!r}")
    return problems
