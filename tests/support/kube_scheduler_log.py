"""kube-scheduler's own scores, read from its klog text log (``-v=10``).

kube-scheduler 1.35 logs, for every pod it scores (pkg/scheduler/schedule_one.go,
prioritizeNodes), at verbosity 10:

- ``"Plugin scored node for pod" pod="ns/name" plugin="NodeResourcesFit" node="n1" score=85``
  for each Score plugin that was not skipped in PreScore and each feasible node; the score is
  already multiplied by the plugin's weight (pkg/scheduler/framework/runtime/framework.go,
  RunScorePlugins);
- ``"Calculated node's final score for pod" pod="ns/name" node="n1" score=285`` for each
  feasible node: the sum of those weighted scores;

and at verbosity 2, after the binding (schedule_one.go, bindingCycle):
``"Successfully bound pod to node" pod="ns/name" node="n1" evaluatedNodes=6 feasibleNodes=3``.
A pod with a single feasible node is bound without scoring (schedule_one.go, schedulePod: "When
only one node after predicate, just use it"), so it has no score lines.

The klog text format (k8s.io/klog/v2, the default ``--logging-format=text``) is a header
``Lmmdd hh:mm:ss.uuuuuu threadid file:line]`` and the message as a Go quoted string followed by
``key=value`` pairs, strings quoted (``klog.KObj`` prints ``namespace/name``), integers bare.

:func:`parse_line` is pure; :class:`ScoreLog` accumulates parsed lines per pod.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

PLUGIN_SCORED = "Plugin scored node for pod"
FINAL_SCORE = "Calculated node's final score for pod"
BOUND = "Successfully bound pod to node"

_HEADER = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ (?P<source>[^\]\s]+)\] (?P<rest>.*)$")
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_MESSAGE = re.compile(rf"^(?P<message>{_QUOTED})(?P<pairs>.*)$")
_PAIR = re.compile(rf'\s(?P<key>[A-Za-z_][\w.-]*)=(?P<value>{_QUOTED}|[^\s"]\S*)')


@dataclass(frozen=True)
class LogLine:
    source: str  # file:line
    message: str
    values: dict[str, str | int]


def _unquote(text: str) -> str:
    """A Go quoted string's value (strconv.Quote: JSON's escapes plus ``\\x..``, ``\\a``...)."""
    try:
        decoded: str = json.loads(text)
    except ValueError:
        return codecs.decode(text[1:-1], "unicode_escape")
    return decoded


def _value(text: str) -> str | int:
    if text.startswith('"'):
        return _unquote(text)
    try:
        return int(text)
    except ValueError:
        return text


def parse_line(line: str) -> LogLine | None:
    """One klog text line with a structured message, or None (anything else: a printf-style
    line, a continuation, a partial line)."""
    header = _HEADER.match(line.rstrip("\n"))
    if header is None:
        return None
    body = _MESSAGE.match(header.group("rest"))
    if body is None:
        return None
    message = _unquote(body.group("message"))
    values = {m.group("key"): _value(m.group("value"))
              for m in _PAIR.finditer(body.group("pairs"))}
    return LogLine(header.group("source"), message, values)


@dataclass
class ScoreCycle:
    """One prioritizeNodes run for a pod: weighted score per node and plugin, and totals."""

    plugins: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> plugin -> score
    totals: dict[str, int] = field(default_factory=dict)  # node -> final score

    def top(self) -> set[str]:
        best = max(self.totals.values(), default=None)
        return {n for n, s in self.totals.items() if s == best}


@dataclass(frozen=True)
class Binding:
    node: str
    evaluated: int
    feasible: int


@dataclass
class ScoreLog:
    """The score cycles and bindings of every pod seen in the lines fed so far."""

    cycles: dict[str, list[ScoreCycle]] = field(default_factory=dict)  # "ns/name" -> cycles
    bindings: dict[str, Binding] = field(default_factory=dict)

    def feed(self, lines: Iterable[str]) -> None:
        for text in lines:
            line = parse_line(text)
            if line is None or line.message not in (PLUGIN_SCORED, FINAL_SCORE, BOUND):
                continue
            pod = str(line.values.get("pod", ""))
            node = str(line.values.get("node", ""))
            if line.message == BOUND:
                self.bindings[pod] = Binding(node, int(line.values.get("evaluatedNodes", 0)),
                                             int(line.values.get("feasibleNodes", 0)))
                continue
            score = int(line.values.get("score", 0))
            cycles = self.cycles.setdefault(pod, [])
            # a cycle's plugin lines come first, then its final lines: a plugin line after a
            # final line starts the pod's next cycle (one scheduling cycle runs at a time)
            if not cycles or (line.message == PLUGIN_SCORED and cycles[-1].totals):
                cycles.append(ScoreCycle())
            cycle = cycles[-1]
            if line.message == PLUGIN_SCORED:
                cycle.plugins.setdefault(node, {})[str(line.values.get("plugin", ""))] = score
            else:
                cycle.totals[node] = score

    def last_cycle(self, pod: str) -> ScoreCycle | None:
        cycles = self.cycles.get(pod)
        return cycles[-1] if cycles else None

    def forget(self, pod: str) -> None:
        """Drop ``pod``'s records (its name is about to be used again)."""
        self.cycles.pop(pod, None)
        self.bindings.pop(pod, None)
