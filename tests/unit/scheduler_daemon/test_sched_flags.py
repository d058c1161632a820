"""``berthmaster scheduler`` takes kube-scheduler's flag spellings where it has the setting.

Upstream: kube-scheduler's options (k8s.io/kubernetes cmd/kube-scheduler/app/options/options.go,
``Options.initFlags``; component-base config/options/leaderelectionconfig.go
``BindLeaderElectionFlags`` for the ``--leader-elect-*`` flags as ``metav1.Duration``; klog's
``-v``/``--v`` Level flag). Go durations parse as Go's ``time.ParseDuration``.
"""

from __future__ import annotations

import argparse

import pytest

from berthmaster.cli import build_parser
from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.verbosity import debug_logging


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("scheduler").parse_args(["scheduler", *argv])


@pytest.mark.parametrize(("text", "seconds"), [
    ("15s", 15.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("500ms", 0.5), ("0", 0.0),
    ("-2s", -2.0), ("+2s", 2.0), (".5s", 0.5), ("100us", 1e-4), ("100µs", 1e-4),
    ("100μs", 1e-4), ("2000000ns", 0.002),
])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "5 m", "1h 30m", "5d", "m", "-", "1s-2s"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_go_duration(text)


@pytest.mark.parametrize(("argv", "durations"), [
    ((), (15.0, 10.0, 2.0)),  # kube-scheduler's defaults
    # what the chart passes: plain seconds
    (("--leader-elect-lease-duration=15", "--leader-elect-renew-deadline=10",
      "--leader-elect-retry-period=2"), (15.0, 10.0, 2.0)),
    # kube-scheduler's spelling: Go durations
    (("--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s",
      "--leader-elect-retry-period=2s"), (15.0, 10.0, 2.0)),
    (("--leader-elect-lease-duration", "1m", "--leader-elect-renew-deadline=45s",
      "--leader-elect-retry-period=1500ms"), (60.0, 45.0, 1.5)),
    (("--leader-elect-retry-period=2.5",), (15.0, 10.0, 2.5)),
])
def test_leader_election_periods(argv: tuple[str, ...], durations: tuple[float, ...]) -> None:
    args = parse(*argv)
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
            args.leader_elect_retry_period) == durations


@pytest.mark.parametrize("value", ["15 seconds", "15d", "0s", "-5s", "0"])
def test_bad_leader_election_periods_are_refused(value: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(f"--leader-elect-lease-duration={value}")
    assert exit_.value.code == 2
    assert "--leader-elect-lease-duration" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "verbosity", "debug"), [
    ((), 0, False),
    (("-v", "4"), 4, True),
    (("-v4",), 4, True),
    (("--v=2",), 2, False),
    (("--v", "5"), 5, True),
    (("-v",), 4, True),  # berthmaster's older boolean -v: debug
    (("--verbose",), 4, True),
    (("-v", "--kubeconfig", "k"), 4, True),  # a bare -v before another flag
])
def test_verbosity_levels(argv: tuple[str, ...], verbosity: int, debug: bool) -> None:
    args = parse(*argv)
    assert args.verbosity == verbosity
    assert debug_logging(args) is debug


@pytest.mark.parametrize(("argv", "elect"), [
    ((), True), (("--leader-elect",), True), (("--leader-elect=true",), True),
    (("--leader-elect=false",), False), (("--no-leader-elect",), False),
    (("--leader-elect", "--kubeconfig", "k"), True),
])
def test_leader_elect_switch(argv: tuple[str, ...], elect: bool) -> None:
    assert parse(*argv).leader_elect is elect


@pytest.mark.parametrize(("argv", "namespace", "name"), [
    ((), "kube-system", "berthmaster"),
    (("--leader-elect-resource-namespace=ns", "--leader-elect-resource-name=zonal"),
     "ns", "zonal"),
    (("--leader-elect-lease-namespace=ns", "--leader-elect-lease-name=zonal"), "ns", "zonal"),
])
def test_lease_name_aliases(argv: tuple[str, ...], namespace: str, name: str) -> None:
    args = parse(*argv)
    assert (args.leader_elect_lease_namespace, args.leader_elect_lease_name) == (namespace, name)


def test_client_limits_and_lock_and_logging_format() -> None:
    args = parse("--kube-api-qps=120", "--kube-api-burst=240",
                 "--leader-elect-resource-lock=leases", "--logging-format=text")
    assert (args.kube_api_qps, args.kube_api_burst, args.log_format) == (120.0, 240, "text")


def test_other_lock_kinds_are_refused() -> None:
    with pytest.raises(SystemExit):
        parse("--leader-elect-resource-lock=endpoints")


def test_secure_serving_flags_take_kube_schedulers_spellings_and_defaults() -> None:
    """apiserver pkg/server/options: authentication.go, authorization.go, serving.go."""
    args = parse("--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
                 "--authorization-kubeconfig", "/etc/kubernetes/scheduler.conf",
                 "--secure-port=10259", "--authorization-always-allow-paths=/healthz,/debug/*",
                 "--authentication-token-webhook-cache-ttl=30s")
    assert args.authentication_kubeconfig == args.authorization_kubeconfig == (
        "/etc/kubernetes/scheduler.conf")
    assert (args.secure_port, args.bind_address) == (10259, "0.0.0.0")
    assert args.authorization_always_allow_paths == ("/healthz", "/debug/*")
    assert args.authentication_token_webhook_cache_ttl == 30.0
    defaults = parse()
    assert defaults.secure_port == 0  # plain HTTP only unless asked
    assert defaults.authorization_always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert (defaults.authentication_token_webhook_cache_ttl,
            defaults.authorization_webhook_cache_authorized_ttl,
            defaults.authorization_webhook_cache_unauthorized_ttl) == (10.0, 10.0, 10.0)


@pytest.mark.parametrize(("argv", "verbosity"), [((), 0), (("--verbose",), 4), (("--v=2",), 2),
                                                  (("-v", "6"), 6)])
def test_the_operator_takes_the_same_levels(argv: tuple[str, ...], verbosity: int) -> None:
    args = build_parser("operator").parse_args(["operator", *argv])
    assert args.verbosity == verbosity
