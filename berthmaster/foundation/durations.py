"""Durations as Kubernetes spells them: the one home of their parsing and printing.

There is one text format in the objects and flags berthmaster reads: Go's ``time.Duration``
(``time.ParseDuration`` and ``Duration.String`` in Go's src/time/format.go), the format of
``metav1.Duration`` (k8s.io/apimachinery pkg/apis/meta/v1/duration.go, which parses with
``time.ParseDuration``) and of the ``--leader-elect-*`` flags (pflag's ``DurationVar``). The
scheduler's leader-election flags and its Permit timeouts, the serving flags, the descheduler
policy's and KubeDescheduler's ``podLifetime``, the Machine drain timeout, the
MachineHealthCheck's timeouts and the ClusterAutoscaler's delays all go through this module, so
they accept and refuse the same spellings, print durations the way upstream's messages do, and
say the same thing about a bad one. No Prometheus-style duration (``5d``, ``1w``) is read
anywhere; ``d`` is refused as Go refuses it.

- :func:`parse_go_duration`: ``time.ParseDuration`` -> seconds (any sign);
- :func:`parse_go_timedelta`: the same, as a ``timedelta``, refusing negative durations (and a
  zero one unless ``allow_zero``): the rule of the fields that are a wait;
- :func:`format_go_duration`: ``Duration.String`` (``1h30m0s``, ``1.5s``, ``500ms``).

Callers with other range rules (positive flags, non-negative fields) check the sign themselves
and word the error for their field.
"""

from __future__ import annotations

import re
from datetime import timedelta

_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                 "m": 60.0, "h": 3600.0}
_NOT_A_DURATION = "{!r} is not a duration; use a number with a unit, such as 90s, 5m or 1h30m"


def parse_go_duration(text: str) -> float:
    """Go duration syntax -> seconds; ValueError (saying what is accepted) on anything else.

    As Go's ``time.ParseDuration``: a sequence of decimal numbers (``1.5``, ``.5``), each with
    a unit among ``ns us µs ms s m h``; units are required on every number except a bare ``0``;
    one leading sign is allowed; no spaces inside (surrounding ones are stripped).
    """
    value = text.strip()
    if value == "0":
        return 0.0
    sign = -1.0 if value.startswith("-") else 1.0
    if value[:1] in "+-" and value:
        value = value[1:]
    position, total = 0, 0.0
    while position < len(value):
        match = _PART.match(value, position)
        if match is None:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not value or position != len(value):
        raise ValueError(_NOT_A_DURATION.format(text))
    return sign * total


def parse_go_timedelta(text: str, *, allow_zero: bool = False) -> timedelta:
    """A wait written as a Go duration -> timedelta; a negative one (or zero, unless
    ``allow_zero``) is refused with the same ValueError as a misspelt one."""
    seconds = parse_go_duration(text)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError(_NOT_A_DURATION.format(text))
    return timedelta(seconds=seconds)


def format_go_duration(seconds: float) -> str:
    """Go's ``Duration.String`` (nanosecond precision): ``0s``; under a second in the largest of
    ``ms``, ``µs``, ``ns`` that fits (``500ms``, ``1.5µs``); otherwise hours and minutes when not
    zero, then seconds with their fraction trimmed (``45s``, ``1.5s``, ``5m0s``, ``1h30m0s``)."""
    nanos = round(seconds * 1e9)
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos == 0:
        return "0s"
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _decimal(nanos, size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _decimal(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{fraction:0{digits}d}".rstrip("0")
