"""The aggregation layer of the local control plane, as kubeadm sets it up: a front-proxy CA
and a client certificate ``front-proxy-client`` under it (kubernetes
cmd/kubeadm/app/phases/certs/certlist.go KubeadmCertFrontProxyCA, KubeadmCertFrontProxyClient;
cmd/kubeadm/app/constants/constants.go), and the kube-apiserver flags naming them
(cmd/kubeadm/app/phases/controlplane/manifests.go getAPIServerCommand)."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from berthmaster.tooling.devcluster.certs import ensure_pki
from berthmaster.tooling.devcluster.cluster import aggregation_flags


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _common_name(name: x509.Name) -> str:
    return str(name.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_front_proxy_client_is_issued_by_its_own_ca_for_client_auth(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    ca, client = _load(pki.front_proxy_ca_cert), _load(pki.front_proxy_client_cert)
    assert _common_name(ca.subject) == "front-proxy-ca"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert _common_name(client.subject) == "front-proxy-client"
    assert client.issuer == ca.subject
    assert client.issuer != _load(pki.ca_cert).subject
    usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    client.verify_directly_issued_by(ca)
    assert [p.name for p in sorted(pki.root.glob("front-proxy-*"))] == [
        "front-proxy-ca.crt", "front-proxy-ca.key",
        "front-proxy-client.crt", "front-proxy-client.key"]


def test_an_older_pki_gains_the_front_proxy_material_and_keeps_its_ca(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    ca = pki.ca_cert.read_bytes()
    for path in pki.root.glob("front-proxy-*"):
        path.unlink()
    again = ensure_pki(tmp_path / "pki")
    assert again.ca_cert.read_bytes() == ca
    assert again.front_proxy_client_cert.is_file()


def test_apiserver_flags_are_kubeadms(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    flags = aggregation_flags(pki, route_to_endpoints=False)
    assert flags == [
        f"--requestheader-client-ca-file={pki.root}/front-proxy-ca.crt",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        f"--proxy-client-cert-file={pki.root}/front-proxy-client.crt",
        f"--proxy-client-key-file={pki.root}/front-proxy-client.key",
    ]
    assert aggregation_flags(pki, route_to_endpoints=True) == [
        *flags, "--enable-aggregator-routing=true"]
