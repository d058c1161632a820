"""RFC 3339 stamps (berthmaster/foundation/times.py), read as apimachinery's
metav1.Time.UnmarshalJSON
reads them (Go's time.Parse with time.RFC3339: fractional seconds of any length, any zone) and
written as metav1.Time.MarshalJSON / metav1.MicroTime.MarshalJSON write them.

The Machine controller's old parser (strptime without fractions) refused ``...05.5Z``; the
descheduler's (datetime.fromisoformat) accepted a stamp without a zone and returned a naive
datetime that no aware time can be compared with. Both cases are rows below.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.foundation.times import (
    _RFC3339,
    _from_groups,
    format_rfc3339,
    format_rfc3339_micro,
    parse_rfc3339,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-01-02T15:04:05Z", datetime(2026, 1, 2, 15, 4, 5, tzinfo=UTC)),
    ("2026-01-02T15:04:05.5Z", datetime(2026, 1, 2, 15, 4, 5, 500000, tzinfo=UTC)),
    ("2026-01-02T15:04:05.123456Z", datetime(2026, 1, 2, 15, 4, 5, 123456, tzinfo=UTC)),
    ("2026-01-02T15:04:05.123456789Z", datetime(2026, 1, 2, 15, 4, 5, 123456, tzinfo=UTC)),
    ("2026-01-02T16:04:05+01:00",
     datetime(2026, 1, 2, 16, 4, 5, tzinfo=timezone(timedelta(hours=1)))),
    ("2026-01-02T10:34:05.25-04:30",
     datetime(2026, 1, 2, 10, 34, 5, 250000, tzinfo=timezone(-timedelta(hours=4, minutes=30)))),
    ("", None),
    (None, None),
])
def test_reads_what_the_api_server_and_clients_write(text: str | None,
                                                    expected: datetime | None) -> None:
    assert parse_rfc3339(text) == expected


@pytest.mark.parametrize("text", [
    "2026-01-02T15:04:05",  # no zone: RFC 3339 requires one
    "2026-01-02 15:04:05Z",  # a space for the T
    "2026-01-02",
    "2026-13-02T15:04:05Z",  # month 13
    "2026-01-02T15:04:05.Z",
    "yesterday",
])
def test_refuses_what_is_not_rfc3339_saying_what_is(text: str) -> None:
    with pytest.raises(ValueError, match="is not an RFC 3339 time; use a form such as"):
        parse_rfc3339(text)


def test_writes_whole_seconds_and_micro_seconds_in_utc() -> None:
    moment = datetime(2026, 1, 2, 16, 4, 5, 120000, tzinfo=timezone(timedelta(hours=1)))
    assert format_rfc3339(moment) == "2026-01-02T15:04:05Z"
    assert format_rfc3339_micro(moment) == "2026-01-02T15:04:05.120000Z"
    assert parse_rfc3339(format_rfc3339_micro(moment)) == moment


# parse_rfc3339 converts an accepted stamp with datetime.fromisoformat; the reference is the
# field-by-field conversion of the pattern's groups (_from_groups), which it must equal on
# every stamp the pattern accepts: same instant, same offset, or the same refusal.
_digits = lambda n: st.text("0123456789", min_size=n, max_size=n)  # noqa: E731


@st.composite
def _stamps(draw: st.DrawFn) -> str:
    date = f"{draw(_digits(4))}-{draw(_digits(2))}-{draw(_digits(2))}"
    clock = f"{draw(_digits(2))}:{draw(_digits(2))}:{draw(_digits(2))}"
    fraction = draw(st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=12)
                              .map(lambda d: "." + d)))
    zone = draw(st.one_of(st.just("Z"), st.builds(
        lambda sign, h, m: f"{sign}{h}:{m}", st.sampled_from("+-"), _digits(2), _digits(2))))
    return f"{date}T{clock}{fraction}{zone}"


def _reference(text: str) -> datetime | str:
    match = _RFC3339.fullmatch(text)
    assert match is not None
    try:
        return _from_groups(match, text)
    except ValueError as error:
        return str(error)


@settings(max_examples=400)
@given(st.one_of(_stamps(), st.builds(
    lambda moment, offset: moment.replace(tzinfo=timezone(timedelta(minutes=offset)))
    .isoformat(), st.datetimes(), st.integers(-23 * 60, 23 * 60))))
def test_the_fast_conversion_equals_the_field_by_field_one(text: str) -> None:
    expected = _reference(text)
    try:
        found: datetime | str = parse_rfc3339(text)  # type: ignore[assignment]
    except ValueError as error:
        found = str(error)
    if isinstance(expected, str):
        assert isinstance(found, str)
    else:
        assert isinstance(found, datetime)
        assert found == expected
        assert found.utcoffset() == expected.utcoffset()
        assert (found.year, found.month, found.day, found.hour, found.minute, found.second,
                found.microsecond) == (expected.year, expected.month, expected.day,
                                       expected.hour, expected.minute, expected.second,
                                       expected.microsecond)
