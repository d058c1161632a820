"""RFC 3339 stamps (berthmaster/times.py), read as apimachinery's metav1.Time.UnmarshalJSON
reads them (Go's time.Parse with time.RFC3339: fractional seconds of any length, any zone) and
written as metav1.Time.MarshalJSON / metav1.MicroTime.MarshalJSON write them.

The Machine controller's old parser (strptime without fractions) refused ``...05.5Z``; the
descheduler's (datetime.fromisoformat) accepted a stamp without a zone and returned a naive
datetime that no aware time can be compared with. Both cases are rows below.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from berthmaster.times import format_rfc3339, format_rfc3339_micro, parse_rfc3339


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
