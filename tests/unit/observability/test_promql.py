"""The PromQL selector reader the dashboard/alert test relies on (tests/support/promql.py).

Syntax per Prometheus's promql/parser (lex.go: identifiers, strings, durations; the grouping
modifiers ``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``).
"""

from __future__ import annotations

import pytest

from tests.support.promql import PromQLError, Selector, selectors


@pytest.mark.parametrize(("expression", "expected"), [
    ("up", [Selector("up")]),
    ('sum(leader_election_master_status{name="berthmaster"}) == 0',
     [Selector("leader_election_master_status", (("name", "=", "berthmaster"),))]),
    ("histogram_quantile(0.99, sum by (le) (rate(x_bucket[$__rate_interval])))",
     [Selector("x_bucket")]),
    ('sum by (queue, profile) (a{queue=~"unschedulable|backoff", profile!="x"}) > 10 '
     "and on (queue) b",
     [Selector("a", (("queue", "=~", "unschedulable|backoff"), ("profile", "!=", "x"))),
      Selector("b")]),
    ("time() - drain_started > 1800", [Selector("drain_started")]),
    ("sum(delta(pending[15m])) > 0 and sum(pending)", [Selector("pending"), Selector("pending")]),
    ("max_over_time(rate(c_total[1m])[15m:1m]) offset 5m", [Selector("c_total")]),
    ('absent(g{a="by (x)"})', [Selector("g", (("a", "=", "by (x)"),))]),
    ("count by (phase) (mapi_machine_created_timestamp_seconds) or vector(0)",
     [Selector("mapi_machine_created_timestamp_seconds")]),
    ("1 + 2e3", []),
])
def test_selectors(expression: str, expected: list[Selector]) -> None:
    assert selectors(expression) == expected


def test_a_selector_without_a_name_is_refused() -> None:
    with pytest.raises(PromQLError, match="without a metric name"):
        selectors('sum({job="x"})')
