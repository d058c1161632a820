"""Go's time.ParseDuration and Duration.String (src/time/format.go in the Go tree), the format
of metav1.Duration (k8s.io/apimachinery pkg/apis/meta/v1/duration.go)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from berthmaster.foundation.durations import (
    format_go_duration,
    parse_go_duration,
    parse_go_timedelta,
)


@pytest.mark.parametrize(("text", "seconds"), [
    ("10s", 10.0), ("10m", 600.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1.5h", 5400.0),
    ("0", 0.0), ("2m3s", 123.0), ("100us", 1e-4), ("-2s", -2.0), ("+2s", 2.0), (".5s", 0.5),
    ("100µs", 1e-4), ("100μs", 1e-4), ("2000000ns", 0.002), (" 5m ", 300.0),
])
def test_parse_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "5d", "1w", "m", "1h 30m", "-",
                                  "1s-2s"])
def test_parse_go_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration; use a number with a unit"):
        parse_go_duration(text)


def test_parse_go_timedelta_refuses_negative_and_zero_unless_allowed() -> None:
    assert parse_go_timedelta("1h30m") == timedelta(minutes=90)
    assert parse_go_timedelta("0", allow_zero=True) == timedelta(0)
    for text in ("0", "-5m", "0s"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_go_timedelta(text)
    with pytest.raises(ValueError, match="not a duration"):
        parse_go_timedelta("-1s", allow_zero=True)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (45, "45s"), (300, "5m0s"), (5400, "1h30m0s"), (90, "1m30s"), (1.5, "1.5s"),
    (120, "2m0s"), (3600, "1h0m0s"), (0.5, "500ms"), (0.0015, "1.5ms"), (1.5e-6, "1.5µs"),
    (2e-9, "2ns"), (-90, "-1m30s"), (3661.25, "1h1m1.25s"),
])
def test_format_go_duration_is_gos_string(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text
