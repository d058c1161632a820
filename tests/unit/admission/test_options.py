"""``berthmaster operator``'s admission flags: parsed by the real CLI parser into settings."""

from __future__ import annotations

import pytest

from berthmaster.cli import build_parser
from berthmaster.errors import ConfigurationError
from berthmaster.operator.admission.options import AdmissionSettings, settings_from_args


def parse(*flags: str) -> AdmissionSettings | None:
    return settings_from_args(build_parser("operator").parse_args(["operator", *flags]))


def settings(*flags: str) -> AdmissionSettings:
    parsed = parse(*flags)
    assert parsed is not None
    return parsed


def test_off_without_listen() -> None:
    assert parse() is None


def test_standalone_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    got = settings("--admission-listen", "127.0.0.1:9443")
    assert (got.url, got.namespace, got.name, got.config_map, got.secret) == (
        "https://127.0.0.1:9443", "berthmaster", "berthmaster-placement",
        "berthmaster-placement", "berthmaster-placement-tls")
    assert got.hosts() == ["127.0.0.1", "localhost"]
    assert got.failure_policy == "Fail" and got.timeout_seconds == 5


def test_in_a_cluster_behind_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "bm")
    got = settings("--admission-listen", "0.0.0.0:9443", "--admission-service", "bm-admission")
    assert got.namespace == "bm"
    assert got.hosts() == ["bm-admission.bm.svc", "bm-admission.bm.svc.cluster.local",
                           "bm-admission.bm", "bm-admission"]


@pytest.mark.parametrize("flags,message", [
    (("--admission-listen", "9443"), "is not HOST:PORT"),
    (("--admission-listen", "127.0.0.1:0"), "is not HOST:PORT"),
    (("--admission-listen", "127.0.0.1:9443", "--admission-timeout-seconds", "31"),
     "between 1 and 30"),
])
def test_bad_flags_are_configuration_errors(flags: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        settings(*flags)


def test_short_lifetimes_for_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTHMASTER_ADMISSION_CERT_SECONDS", "9")
    monkeypatch.setenv("BERTHMASTER_ADMISSION_CHECK_SECONDS", "1")
    got = settings("--admission-listen", "127.0.0.1:9443")
    assert got.lifetimes.serving.total_seconds() == 9 and got.check_seconds == 1
    monkeypatch.setenv("BERTHMASTER_ADMISSION_CA_SECONDS", "soon")
    with pytest.raises(ConfigurationError, match="BERTHMASTER_ADMISSION_CA_SECONDS"):
        settings("--admission-listen", "127.0.0.1:9443")
