"""The PromQL selector reader the dashboard/alert test relies on (tests/support/promql.py).

Syntax per Prometheus's promql/parser (lex.go: identifiers, strings, durations; the grouping
modifiers ``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``).
"""

from __future__ import annotations

import pytest

from tests.support.promql import PromQLError, Selector, selectors, unscoped


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


SCOPE = {"job": "$job", "namespace": "$namespace"}


@pytest.mark.parametrize("expression", [
    'sum by (queue) (scheduler_pending_pods{job=~"$job", namespace="$namespace"})',
    'absent(scheduler_pending_pods{queue="active", namespace="$namespace", job="$job"})',
    'time() - drain_started{job=~"$job"} > 1800',  # exports its own namespace
])
def test_scoped_expressions_pass(expression: str) -> None:
    assert unscoped(expression, SCOPE, {"drain_started": frozenset({"namespace"})}) == []


@pytest.mark.parametrize(("expression", "missing"), [
    # kube-scheduler exports the same scheduler_* names (pkg/scheduler/metrics/metrics.go):
    # without the job matcher the query reads its series too.
    ("sum by (queue) (scheduler_pending_pods)", ["job", "namespace"]),
    ('sum(a{job=~"$job", namespace="$namespace"}) and sum(b{job=~"$job"})', ["namespace"]),
    ('sum(a{job!="$job", namespace="other"})', ["job", "namespace"]),
])
def test_unscoped_selectors_are_named(expression: str, missing: list[str]) -> None:
    problems = unscoped(expression, SCOPE)
    assert [p.split(" has no ")[1].split("=")[0] for p in problems] == missing
