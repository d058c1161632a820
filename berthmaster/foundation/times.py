"""RFC 3339 timestamps as the API server writes them: the one parser and formatter every
component uses (beside :mod:`berthmaster.foundation.durations` for Go durations).

Reading follows apimachinery's ``metav1.Time.UnmarshalJSON``, which hands the string to Go's
``time.Parse(time.RFC3339, ...)``: a date, an upper-case ``T``, a time, optional fractional
seconds of any length (``metav1.MicroTime`` fields such as an Event's ``eventTime`` or a Lease's
``renewTime`` carry six digits, some clients nine), and a zone (``Z`` or ``±hh:mm``). Python
keeps microseconds, so digits beyond the sixth are dropped (truncated, not rounded). A stamp
without a zone is refused: comparing it with an aware time would otherwise fail far from the
field that caused it.

Writing follows ``metav1.Time.MarshalJSON`` (whole seconds, UTC, ``Z``) and
``metav1.MicroTime.MarshalJSON`` (six fractional digits).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))")


def parse_rfc3339(text: str | None) -> datetime | None:
    """An RFC 3339 stamp -> an aware datetime; ``None`` for an absent or empty field.

    ValueError (saying what is accepted) for anything else, such as a stamp without a zone.
    The pattern decides what is accepted; the conversion of an accepted stamp is the C
    ``datetime.fromisoformat`` (thirty times faster than building it from the groups, which a
    descheduler pass over 50,000 pods notices), with :func:`_from_groups` as the fallback for
    the few stamps it refuses (an hour of 24, say) so the error is ours either way.
    """
    if not text:
        return None
    stamp = text.strip()
    match = _RFC3339.fullmatch(stamp)
    if match is None:
        raise ValueError(_refusal(text))
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return _from_groups(match, text)


def _from_groups(match: re.Match[str], text: str) -> datetime:
    """The stamp built field by field from the pattern's groups (the reference conversion)."""
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = (match.group(7) or "")[:6].ljust(6, "0")
    zone = UTC
    if match.group(8) != "Z":
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        zone = timezone(-offset if match.group(9) == "-" else offset)
    try:
        return datetime(year, month, day, hour, minute, second, int(fraction), tzinfo=zone)
    except ValueError as error:  # a day or hour out of range
        raise ValueError(f"{_refusal(text)} ({error})") from None


def _refusal(text: str) -> str:
    return (f"{text!r} is not an RFC 3339 time; use a form such as 2026-01-02T15:04:05Z or "
            "2026-01-02T15:04:05.5+01:00")


def format_rfc3339(moment: datetime) -> str:
    """``metav1.Time``: whole seconds in UTC, ``2026-01-02T15:04:05Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_rfc3339_micro(moment: datetime) -> str:
    """``metav1.MicroTime``: microseconds in UTC, ``2026-01-02T15:04:05.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
