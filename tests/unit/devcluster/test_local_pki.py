"""The local control plane's certificates carry the key identifiers Go's x509 writes into
every certificate kubeadm issues (crypto/x509 CreateCertificate: SubjectKeyId for a CA,
AuthorityKeyId from the parent's), which Python 3.13's default verification
(ssl.VERIFY_X509_STRICT) requires of every certificate a CA issues: without them the image's
components refuse the API server's certificate ("Missing Authority Key Identifier")."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from berthmaster.tooling.devcluster.certs import CLIENTS, ensure_pki


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_every_issued_certificate_names_its_authority_key(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    ca = _load(pki.ca_cert)
    authority = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    for path in (pki.serving_cert, *(pki.client_cert(stem) for stem in CLIENTS)):
        cert = _load(path)
        aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
        assert aki.key_identifier == authority, path.name
        assert cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
