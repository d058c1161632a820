"""``berthmaster admission``'s flags: parsed by the real CLI parser into settings."""

from __future__ import annotations

import pytest

from berthmaster.cli import build_parser
from berthmaster.foundation.errors import ConfigurationError
from berthmaster.operator.admission.options import AdmissionSettings, Limits, settings_from_args
from berthmaster.tooling.devcluster.cluster import APISERVER_MAX_REQUEST_BODY_BYTES


def settings(*flags: str) -> AdmissionSettings:
    return settings_from_args(build_parser("admission").parse_args(["admission", *flags]))


def test_self_managed_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    got = settings("--listen", "127.0.0.1:9443")
    assert got.self_managed
    assert (got.url, got.namespace, got.name, got.config_map, got.secret) == (
        "https://127.0.0.1:9443", "berthmaster", "berthmaster-placement",
        "berthmaster-placement", "berthmaster-placement-tls")
    assert got.hosts() == ["127.0.0.1", "localhost"]
    assert got.failure_policy == "Fail" and got.timeout_seconds == 5
    assert got.limits == Limits()


def test_in_a_cluster_with_the_charts_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "bm")
    got = settings("--webhook-cert-file", "/tls/tls.crt", "--webhook-key-file", "/tls/tls.key",
                   "--client-ca-file", "/client/ca.crt", "--failure-policy", "Ignore")
    assert got.namespace == "bm" and not got.self_managed and got.secret == ""
    assert (got.host, got.port) == ("0.0.0.0", 9443)
    assert got.client_ca_file == "/client/ca.crt" and got.failure_policy == "Ignore"


def test_limits() -> None:
    got = settings("--max-request-bytes", "512Ki", "--max-tolerations", "50",
                   "--max-in-flight", "4")
    assert got.limits == Limits(max_request_bytes=512 * 1024, max_tolerations=50,
                                max_in_flight=4)


def test_the_default_request_limit_holds_an_update_of_the_largest_objects() -> None:
    """Two objects at kube-apiserver's request limit (MaxRequestBodyBytes, 3 MiB, in
    k8s.io/apiserver pkg/server/config.go) and 1 MiB for the rest of the review: 7 MiB, as
    sigs.k8s.io/controller-runtime pkg/webhook/admission/http.go (maxRequestSize)."""
    assert Limits().max_request_bytes == 7 * 1024 * 1024
    assert settings().limits.max_request_bytes == 2 * APISERVER_MAX_REQUEST_BODY_BYTES + 1024 ** 2


@pytest.mark.parametrize("flags,message", [
    (("--listen", "9443"), "is not HOST:PORT"),
    (("--listen", "127.0.0.1:0"), "is not HOST:PORT"),
    (("--timeout-seconds", "31"), "between 1 and 30"),
    (("--webhook-cert-file", "/tls/tls.crt"), "go together"),
    (("--max-in-flight", "0"), "--max-in-flight must be at least 1"),
])
def test_bad_flags_are_configuration_errors(flags: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        settings(*flags)


def test_a_size_that_is_not_one_is_refused_by_the_parser(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        settings("--max-request-bytes", "3MB")
    assert "'3MB' is not a size in bytes" in capsys.readouterr().err


def test_short_lifetimes_for_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTHMASTER_ADMISSION_CERT_SECONDS", "9")
    monkeypatch.setenv("BERTHMASTER_ADMISSION_CHECK_SECONDS", "1")
    got = settings()
    assert got.lifetimes.serving.total_seconds() == 9 and got.check_seconds == 1
    monkeypatch.setenv("BERTHMASTER_ADMISSION_CA_SECONDS", "soon")
    with pytest.raises(ConfigurationError, match="BERTHMASTER_ADMISSION_CA_SECONDS"):
        settings()


def test_the_in_flight_bytes_budget_takes_sizes_and_must_hold_the_largest_review() -> None:
    assert settings("--max-in-flight-bytes", "64Mi").limits.max_in_flight_bytes == 64 * 1024 ** 2
    assert settings().limits.max_in_flight_bytes == 16 * 1024 ** 2
    with pytest.raises(ConfigurationError, match=r"--max-in-flight-bytes 1048576 is less than "
                       r"--max-request-bytes 7340032.*admission\.maxInFlightBytes"):
        settings("--max-in-flight-bytes", "1Mi")
