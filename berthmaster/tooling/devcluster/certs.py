"""Certificates and keys for the local control plane, generated with ``cryptography``.

One self-signed CA signs: the kube-apiserver serving certificate (SANs for loopback and the
in-cluster ``kubernetes`` service names), and client certificates for the admin
(``system:masters``), the controller-manager (``system:kube-controller-manager``), the scheduler
(``system:kube-scheduler``) and kwok (``system:masters``: it manages nodes and pods wholesale).
A separate RSA key pair signs and verifies service-account tokens; the apiserver and the
controller-manager share it. Everything is written once into ``pki/`` and reused on restart.

A second CA, ``front-proxy-ca``, and its one client certificate, ``front-proxy-client``, serve
the API server's aggregation layer as kubeadm sets it up (kubernetes
cmd/kubeadm/app/phases/certs/certlist.go KubeadmCertFrontProxyCA, KubeadmCertFrontProxyClient;
file names from cmd/kubeadm/app/constants/constants.go): the API server presents the client
certificate to an aggregated API server (metrics-server), which trusts the identity headers it
sends because the certificate chains to the CA named by ``--requestheader-client-ca-file``.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)

# Client identities: file stem -> (common name, organisations).
CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("berthmaster-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "kwok": ("kwok-controller", ("system:masters",)),
}


@dataclasses.dataclass(frozen=True)
class Pki:
    """Paths of everything :func:`ensure_pki` writes."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.root / "sa.pub"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.root / "front-proxy-ca.crt"

    @property
    def front_proxy_ca_key(self) -> Path:
        return self.root / "front-proxy-ca.key"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.root / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.root / "front-proxy-client.key"

    def client_cert(self, name: str) -> Path:
        return self.root / f"{name}.crt"

    def client_key(self, name: str) -> Path:
        return self.root / f"{name}.key"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organisations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organisations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _issue(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        # the key identifiers Go's x509 writes into every certificate kubeadm issues, and
        # Python 3.13's default TLS verification (VERIFY_X509_STRICT) requires of a leaf
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _self_signed_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    ca_key = _key()
    ca_subject = _name(common_name)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ca_key, ca_cert


# kubeadm's names (cmd/kubeadm/app/phases/certs/certlist.go, constants.go
# FrontProxyClientCertCommonName); the API server's --requestheader-allowed-names lists the CN.
FRONT_PROXY_CA_NAME = "front-proxy-ca"
FRONT_PROXY_CLIENT_NAME = "front-proxy-client"


def ensure_front_proxy(pki: Pki) -> None:
    """The aggregation layer's CA and the API server's client certificate under it, unless
    already there (a pki/ written before they existed gets them on the next start)."""
    if pki.front_proxy_ca_cert.exists() and pki.front_proxy_client_cert.exists():
        return
    ca_key, ca_cert = _self_signed_ca(FRONT_PROXY_CA_NAME)
    _write_key(pki.front_proxy_ca_key, ca_key)
    _write_cert(pki.front_proxy_ca_cert, ca_cert)
    key = _key()
    cert = _issue(_name(FRONT_PROXY_CLIENT_NAME), key.public_key(), ca_cert, ca_key,
                  ExtendedKeyUsageOID.CLIENT_AUTH)
    _write_key(pki.front_proxy_client_key, key)
    _write_cert(pki.front_proxy_client_cert, cert)


def ensure_pki(root: Path, service_ip: str = "10.96.0.1",
               extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create the CA, serving, client and service-account material unless already present.
    ``extra_ips`` are further addresses the API server is reached at (a real node's pods
    reach it at the bridge's gateway)."""
    pki = Pki(root)
    if pki.ca_cert.exists() and all(pki.client_cert(n).exists() for n in CLIENTS):
        ensure_front_proxy(pki)
        return pki
    root.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _self_signed_ca("berthmaster-local-ca")
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.ca_cert, ca_cert)

    serving_key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName(name)
        for name in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                     "kubernetes.default.svc.cluster.local")
    ]
    sans += [x509.IPAddress(ipaddress.ip_address(ip))
             for ip in ("127.0.0.1", service_ip, *extra_ips)]
    serving = _issue(_name("kube-apiserver"), serving_key.public_key(), ca_cert, ca_key,
                     ExtendedKeyUsageOID.SERVER_AUTH, sans)
    _write_key(pki.serving_key, serving_key)
    _write_cert(pki.serving_cert, serving)

    for stem, (common_name, organisations) in CLIENTS.items():
        key = _key()
        cert = _issue(_name(common_name, organisations), key.public_key(), ca_cert, ca_key,
                      ExtendedKeyUsageOID.CLIENT_AUTH)
        _write_key(pki.client_key(stem), key)
        _write_cert(pki.client_cert(stem), cert)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo,
    ))
    ensure_front_proxy(pki)
    return pki


def ensure_client(pki: Pki, stem: str, common_name: str, organisations: tuple[str, ...] = ()
                  ) -> None:
    """One more client certificate from the existing CA (a real node's kubelet and
    kube-proxy, whose names depend on the node), unless already there."""
    if pki.client_cert(stem).exists():
        return
    issue_client(pki, pki.client_cert(stem), pki.client_key(stem), common_name, organisations)


def issue_client(pki: Pki, cert_path: Path, key_path: Path, common_name: str,
                 organisations: tuple[str, ...] = ()) -> None:
    """A client certificate (and its key) from ``pki``'s CA, written where asked: the kubelet
    machine provider keeps each node's identity with the node, beside no other cluster file."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not the EC key ensure_pki writes")
    key = _key()
    cert = _issue(_name(common_name, organisations), key.public_key(), ca_cert, ca_key,
                  ExtendedKeyUsageOID.CLIENT_AUTH)
    _write_key(key_path, key)
    _write_cert(cert_path, cert)


def kubeconfig(server: str, pki: Pki, client: str, cluster_name: str) -> dict[str, object]:
    """A kubeconfig (as a dict) for one client identity, with absolute file references."""
    user = f"{cluster_name}-{client}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {
            "server": server, "certificate-authority": str(pki.ca_cert)}}],
        "users": [{"name": user, "user": {
            "client-certificate": str(pki.client_cert(client)),
            "client-key": str(pki.client_key(client))}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
    }
