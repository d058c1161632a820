"""The secure endpoint's settings (berthmaster.foundation.serving_options) and self-signed
certificate
(berthmaster.foundation.serving).

Upstream: k8s.io/apiserver@v0.35.4 ``pkg/server/options/serving.go`` (``--secure-port``,
``--bind-address``, ``--tls-cert-file``/``--tls-private-key-file``) and k8s.io/client-go
``util/cert/cert.go`` GenerateSelfSignedCertKeyWithFixtures (the certificate made without
files: a CA named ``<host>-ca@<time>``, a certificate ``<host>@<time>`` for localhost and
127.0.0.1, a year long).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress

import pytest
from cryptography import x509

from berthmaster.foundation.errors import ConfigurationError
from berthmaster.foundation.serving import self_signed_certificate
from berthmaster.foundation.serving_options import SecureServing, add_secure_serving_arguments


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_secure_serving_arguments(parser)
    return parser.parse_args(list(argv))


def test_no_secure_port_means_no_secure_endpoint() -> None:
    assert SecureServing.from_args(parse()) is None


def test_settings_from_the_flags() -> None:
    settings = SecureServing.from_args(parse(
        "--secure-port=10259", "--bind-address=10.0.0.7",
        "--authorization-webhook-cache-unauthorized-ttl=1m",
        "--authorization-always-allow-paths="))
    assert settings == SecureServing(10259, "10.0.0.7", denied_ttl=60.0, always_allow_paths=())


def test_every_bad_flag_is_named_at_once() -> None:
    with pytest.raises(ConfigurationError) as raised:
        SecureServing.from_args(parse("--secure-port=70000", "--bind-address=localhost",
                                      "--tls-cert-file=/tls/tls.crt",
                                      "--authorization-always-allow-paths=/a*b"))
    message = str(raised.value)
    for flag in ("--secure-port 70000", "--bind-address 'localhost'",
                 "--tls-private-key-file", "--authorization-always-allow-paths"):
        assert flag in message


def test_a_negative_ttl_is_a_flag_error() -> None:
    with pytest.raises(SystemExit):
        parse("--authentication-token-webhook-cache-ttl=-1s")


def test_self_signed_certificate_is_upstreams_shape() -> None:
    now = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)
    chain, key = self_signed_certificate(now=now)
    cert, ca = x509.load_pem_x509_certificates(chain)
    stamp = int(now.timestamp())
    assert cert.subject.rfc4514_string() == f"CN=localhost@{stamp}"
    assert cert.issuer == ca.subject
    assert ca.subject.rfc4514_string() == f"CN=localhost-ca@{stamp}"
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.not_valid_before_utc == now - datetime.timedelta(hours=1)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(days=365)
    assert key.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
