"""The serving certificate and CA through their lifetimes (certs.reconcile on a fake clock)."""

from __future__ import annotations

import datetime

from cryptography import x509

from berthmaster.operator.admission import certs

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
LIFE = certs.Lifetimes(ca=datetime.timedelta(days=30), serving=datetime.timedelta(days=3))
HOSTS = ["127.0.0.1", "localhost"]


def load(pem: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem.encode())


def names(pem: str) -> set[str]:
    sans = load(pem)[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(v) for v in sans.get_values_for_type(x509.DNSName)} | {
        str(v) for v in sans.get_values_for_type(x509.IPAddress)}


def signed_by(cert_pem: str, ca_pem: str) -> bool:
    try:
        load(cert_pem)[0].verify_directly_issued_by(load(ca_pem)[0])
    except Exception:
        return False
    return True


def test_first_reconcile_makes_everything() -> None:
    data = certs.reconcile(None, HOSTS, T0, LIFE)
    assert names(data[certs.TLS_CERT]) == {"127.0.0.1", "localhost"}
    assert data[certs.CA_CERT] == data[certs.CURRENT_CA]
    assert signed_by(data[certs.TLS_CERT], data[certs.CA_CERT])


def test_nothing_changes_while_valid() -> None:
    data = certs.reconcile(None, HOSTS, T0, LIFE)
    assert certs.reconcile(data, HOSTS, T0 + datetime.timedelta(days=1), LIFE) == data


def test_short_lifetimes_last_two_thirds() -> None:
    """The start is backdated for clock skew by at most a tenth of the lifetime, so a
    certificate of seconds is not due the moment it is made."""
    short = certs.Lifetimes(ca=datetime.timedelta(seconds=30),
                            serving=datetime.timedelta(seconds=9))
    data = certs.reconcile(None, HOSTS, T0, short)
    assert certs.reconcile(data, HOSTS, T0 + datetime.timedelta(seconds=5), short) == data
    later = certs.reconcile(data, HOSTS, T0 + datetime.timedelta(seconds=7), short)
    assert later[certs.TLS_CERT] != data[certs.TLS_CERT]
    assert later[certs.CA_CERT] == data[certs.CA_CERT]


def test_serving_certificate_renewed_with_a_third_left_same_ca() -> None:
    data = certs.reconcile(None, HOSTS, T0, LIFE)
    later = certs.reconcile(data, HOSTS, T0 + datetime.timedelta(days=2, hours=1), LIFE)
    assert later[certs.TLS_CERT] != data[certs.TLS_CERT]
    assert later[certs.CA_CERT] == data[certs.CA_CERT]
    assert signed_by(later[certs.TLS_CERT], data[certs.CA_CERT])


def test_new_hosts_mean_a_new_certificate() -> None:
    data = certs.reconcile(None, HOSTS, T0, LIFE)
    moved = certs.reconcile(data, ["webhook.berthmaster.svc"], T0, LIFE)
    assert "webhook.berthmaster.svc" in names(moved[certs.TLS_CERT])


def test_ca_rotation_publishes_the_next_ca_before_serving_from_it() -> None:
    data = certs.reconcile(None, HOSTS, T0, LIFE)
    old_ca = data[certs.CURRENT_CA]
    due = T0 + datetime.timedelta(days=21)  # a third of 30 days left
    staged = certs.reconcile(data, HOSTS, due, LIFE)
    # Step 1: the bundle trusts both; the certificate in use is still the old CA's.
    bundle = load(staged[certs.CA_CERT])
    assert len(bundle) == 2 and staged[certs.CURRENT_CA] == old_ca
    assert signed_by(staged[certs.TLS_CERT], old_ca)
    # Not before the promotion delay (the API server may not have the bundle yet).
    assert certs.reconcile(staged, HOSTS, due + datetime.timedelta(seconds=59), LIFE) == staged
    # Step 2, a reconcile later: promoted, a certificate from the new CA, both trusted.
    promoted = certs.reconcile(staged, HOSTS, due + datetime.timedelta(minutes=1), LIFE)
    assert promoted[certs.CURRENT_CA] == staged[certs.NEXT_CA_CERT]
    assert certs.NEXT_CA_CERT not in promoted and certs.NEXT_CA_SINCE not in promoted
    assert signed_by(promoted[certs.TLS_CERT], promoted[certs.CURRENT_CA])
    assert {c.serial_number for c in load(promoted[certs.CA_CERT])} == {
        load(old_ca)[0].serial_number, load(promoted[certs.CURRENT_CA])[0].serial_number}


def test_an_expired_or_broken_secret_starts_over() -> None:
    data = certs.reconcile(None, HOSTS, T0, LIFE)
    expired = certs.reconcile(data, HOSTS, T0 + datetime.timedelta(days=31), LIFE)
    assert expired[certs.CURRENT_CA] != data[certs.CURRENT_CA]
    broken = certs.reconcile({certs.CURRENT_CA: "garbage"}, HOSTS, T0, LIFE)
    assert signed_by(broken[certs.TLS_CERT], broken[certs.CA_CERT])


def test_serving_certificate_never_outlives_its_ca() -> None:
    short = certs.Lifetimes(ca=datetime.timedelta(days=1), serving=datetime.timedelta(days=90))
    data = certs.reconcile(None, HOSTS, T0, short)
    assert load(data[certs.TLS_CERT])[0].not_valid_after_utc <= load(
        data[certs.CA_CERT])[0].not_valid_after_utc
