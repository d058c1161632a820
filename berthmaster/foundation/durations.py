"""Go's duration syntax (``time.ParseDuration``), the one parser every component uses.

Kubernetes and OpenShift objects and flags spell durations as Go does: a sequence of decimal
numbers, each with a unit (``90s``, ``1h30m``, ``1.5m``, ``500ms``), optionally signed, and a bare
``0``. The scheduler's leader-election flags, the drain timeout, the MachineHealthCheck timeouts
and the ClusterAutoscaler's delays all parse through :func:`parse_go_duration`, so they accept
and refuse the same spellings and say the same thing about a bad one.
"""

from __future__ import annotations

import re

_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                 "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Go duration syntax -> seconds; ValueError (saying what is accepted) on anything else.

    As Go: units are required on every number except a bare ``0``; one leading sign is allowed;
    no spaces inside. Callers that need a non-negative duration check the sign themselves.
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
        raise ValueError(f"{text!r} is not a duration; use a number with a unit, "
                         "such as 90s, 5m or 1h30m")
    return sign * total
