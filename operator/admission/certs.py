"""The webhook's serving certificate and its CA, kept in a Secret and rotated before expiry.

Design: a pure :func:`reconcile` takes the Secret's data (or nothing), the names the
certificate must carry and the time, and returns the data the Secret should hold, so every step
of a rotation is a table test; handlers.py stores the result, reloads the server's TLS context
and publishes ``ca.crt`` as the webhook configurations' caBundle.

A serving certificate is reissued when a third of its lifetime is left, when it does not name
every host, or when the CA that signed it is no longer the current one; new connections get the
new one while the CA stays, so the API server never sees a certificate it does not trust. The
CA is replaced in two steps for the same reason: when a third of its lifetime is left a next CA
is made and ``ca.crt`` becomes both (old first); only at a reconcile at least
:func:`promotion_delay` later, once that bundle has been published, is the next CA promoted and
a serving certificate issued from it. ``ca.crt``
then keeps the old CA beside the new one until the next rotation.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY = "ca.crt", "ca.key"
NEXT_CA_CERT, NEXT_CA_KEY = "ca-next.crt", "ca-next.key"
NEXT_CA_SINCE = "ca-next.since"  # when the bundle with the next CA was made (ISO 8601)
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
CURRENT_CA = "ca-current.crt"
RENEW_FRACTION = 3  # renew when 1/3 of the lifetime is left


@dataclass(frozen=True)
class Lifetimes:
    ca: datetime.timedelta = datetime.timedelta(days=3650)
    serving: datetime.timedelta = datetime.timedelta(days=90)


def _backdate(lifetime: datetime.timedelta) -> datetime.timedelta:
    """How far before now a certificate starts (clock skew between us and the API server):
    five minutes, or a tenth of a short lifetime, so renewal at a third left still means a
    third of the lifetime asked for."""
    return min(datetime.timedelta(minutes=5), lifetime / 10)


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def new_ca(now: datetime.datetime, lifetime: datetime.timedelta) -> tuple[str, str]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         f"berthmaster-admission-ca@{int(now.timestamp())}")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - _backdate(lifetime))
            .not_valid_after(now + lifetime)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return _pem(cert), _key_pem(key)


def issue_serving(ca_cert_pem: str, ca_key_pem: str, hosts: Sequence[str],
                  now: datetime.datetime, lifetime: datetime.timedelta) -> tuple[str, str]:
    """A serving certificate for ``hosts`` (DNS names or IP addresses) signed by the CA."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    not_after = min(now + lifetime, ca_cert.not_valid_after_utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _backdate(lifetime)).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return _pem(cert), _key_pem(key)


def _load(pem: str) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(pem.encode())
    except ValueError:
        return None


def _due(cert: x509.Certificate, now: datetime.datetime) -> bool:
    """A third or less of the lifetime is left (or it is not valid yet)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now < start or (end - now) * RENEW_FRACTION <= (end - start)


def _names(cert: x509.Certificate) -> set[str]:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(v) for v in sans.get_values_for_type(x509.DNSName)} | {
        str(v) for v in sans.get_values_for_type(x509.IPAddress)}


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def promotion_delay(lifetimes: Lifetimes) -> datetime.timedelta:
    """How long a next CA is only trusted before it signs: a minute (the API server reloads
    webhook configurations within seconds), or a twentieth of a short CA lifetime."""
    return min(datetime.timedelta(minutes=1), lifetimes.ca / 20)


def _since(data: Mapping[str, str]) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(data.get(NEXT_CA_SINCE, ""))
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.UTC)


def reconcile(data: Mapping[str, str] | None, hosts: Sequence[str], now: datetime.datetime,
              lifetimes: Lifetimes = Lifetimes()) -> dict[str, str]:
    """What the Secret should hold now (PEM strings by key); equal to ``data`` when nothing
    is due. ``ca.crt`` is the bundle to trust; ``ca-current.crt`` the CA that signs."""
    data = dict(data or {})
    current = _load(data.get(CURRENT_CA, ""))
    if current is None or not data.get(CA_KEY) or now >= current.not_valid_after_utc:
        ca_pem, ca_key = new_ca(now, lifetimes.ca)
        data = {CURRENT_CA: ca_pem, CA_KEY: ca_key, CA_CERT: ca_pem}
        current = _load(ca_pem)
        assert current is not None
    elif data.get(NEXT_CA_CERT) and data.get(NEXT_CA_KEY):
        # Staged at an earlier reconcile; promoted once the API server surely has the bundle.
        if now >= _since(data) + promotion_delay(lifetimes):
            data.pop(NEXT_CA_SINCE, None)
            next_pem = data.pop(NEXT_CA_CERT)
            data[CA_KEY] = data.pop(NEXT_CA_KEY)
            data[CA_CERT] = next_pem + data[CURRENT_CA]
            data[CURRENT_CA] = next_pem
            current = _load(next_pem)
            assert current is not None
    elif _due(current, now):
        next_pem, next_key = new_ca(now, lifetimes.ca)
        data[NEXT_CA_CERT], data[NEXT_CA_KEY] = next_pem, next_key
        data[NEXT_CA_SINCE] = now.isoformat()
        data[CA_CERT] = data[CURRENT_CA] + next_pem
    serving = _load(data.get(TLS_CERT, ""))
    if (serving is None or not data.get(TLS_KEY) or _due(serving, now)
            or not set(hosts) <= _names(serving) or not _signed_by(serving, current)):
        data[TLS_CERT], data[TLS_KEY] = issue_serving(data[CURRENT_CA], data[CA_KEY], hosts,
                                                      now, lifetimes.serving)
    return data
