"""The release as it reached the cluster: e2e/run.py published it to a registry on loopback
(the distribution project's, built here) with ``make release SKIP_IMAGE=1`` and ``make publish
OFFLINE=1`` (hack/publish.py: the image pushed, signed and attested with a key pair made for the
run, the chart pushed as an OCI artefact) and installed the chart from ``oci://`` with
``image.digest``; the real node's containerd pulled the image through its registry
``config_path`` (nothing was loaded into it).

This checks what a platform team checks of a release: the registry resolves the tag to the
digest the release runs (the distribution spec's ``GET /v2/<name>/manifests/<reference>`` and
its ``Docker-Content-Digest`` header), the node pulled it (the kubelet's ``Pulled`` event,
pkg/kubelet/images/image_manager.go: "Successfully pulled image ..."), the chart in the registry
is the installed one, and cosign verifies the signature and the CycloneDX attestation by key
(offline: no transparency log, cosign cmd/cosign/cli/options/verify.go
``--insecure-ignore-tlog``), while a signature by any other key does not verify.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from e2e.conftest import IMAGE, MODE, NAMESPACE, Kind

REGISTRY = os.environ.get("BERTHMASTER_E2E_REGISTRY", "")
CHART_VERSION = os.environ.get("BERTHMASTER_E2E_CHART_VERSION", "")
COSIGN = os.environ.get("BERTHMASTER_E2E_COSIGN", "cosign")
PUBLIC_KEY = os.environ.get("BERTHMASTER_E2E_COSIGN_PUB", "")
# what a registry may answer for an image: OCI and Docker manifests and indexes
MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json"])

pytestmark = pytest.mark.skipif(
    MODE != "kubelet", reason="e2e/run.py publishes to a loopback registry in kubelet mode only "
    "(kind's nodes cannot reach the host's loopback; on kind the image is loaded)")


def digest() -> str:
    return IMAGE.rpartition("@")[2]


def cosign(*args: str) -> subprocess.CompletedProcess[str]:
    """cosign against the plain-HTTP loopback registry (cosign options/registry.go)."""
    return subprocess.run([COSIGN, *args, "--allow-http-registry", "--allow-insecure-registry",
                           IMAGE], capture_output=True, text=True, timeout=180, check=False)


def test_the_registry_resolves_the_tag_to_the_digest_the_release_runs() -> None:
    assert IMAGE.startswith(f"{REGISTRY}/berthmaster@sha256:"), IMAGE
    request = urllib.request.Request(
        f"http://{REGISTRY}/v2/berthmaster/manifests/{CHART_VERSION}", method="HEAD",
        headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.headers["Docker-Content-Digest"] == digest()


def test_the_node_pulled_the_image_from_the_registry(kind: Kind) -> None:
    """Every pod of the release runs the image by digest, and the kubelet pulled it (the
    first pod to start on the node; the others find it present)."""
    pods = [p for p in kind.items("pods", "-n", NAMESPACE)
            if not p["metadata"].get("deletionTimestamp")]
    assert pods
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == IMAGE, pod["metadata"]["name"]
        assert container["imagePullPolicy"] == "IfNotPresent"
        (status,) = pod["status"]["containerStatuses"]
        assert status["imageID"].endswith(digest()), status["imageID"]
    pulled = [e["message"] for e in kind.items("events", "-n", NAMESPACE,
                                               "--field-selector", "reason=Pulled")]
    assert any(m.startswith(f'Successfully pulled image "{IMAGE}"') for m in pulled), pulled


def test_the_chart_in_the_registry_is_the_installed_one(kind: Kind) -> None:
    shown = yaml.safe_load(kind.helm("show", "chart", f"oci://{REGISTRY}/charts/berthmaster",
                                     "--version", CHART_VERSION, "--plain-http").stdout)
    installed = json.loads(kind.helm("get", "metadata", "berthmaster", "--namespace", NAMESPACE,
                                     "-o", "json").stdout)
    assert (shown["name"], shown["version"]) == ("berthmaster", CHART_VERSION)
    assert (installed["chart"], installed["version"]) == (shown["name"], shown["version"])
    assert installed["appVersion"] == shown["appVersion"]


def test_the_signature_verifies_with_the_release_key() -> None:
    verified = cosign("verify", "--key", PUBLIC_KEY, "--insecure-ignore-tlog=true")
    assert verified.returncode == 0, verified.stderr
    claims = json.loads(verified.stdout)  # one per verified signature bundle
    assert claims
    assert {c["critical"]["image"]["docker-manifest-digest"] for c in claims} == {digest()}


def test_a_signature_by_another_key_does_not_verify(tmp_path: Path) -> None:
    subprocess.run([COSIGN, "generate-key-pair", "--output-key-prefix", str(tmp_path / "other")],
                   check=True, capture_output=True, env={**os.environ, "COSIGN_PASSWORD": ""})
    verified = cosign("verify", "--key", str(tmp_path / "other.pub"),
                      "--insecure-ignore-tlog=true")
    assert verified.returncode != 0
    # cosign v3 reads the signature as a bundle: "no matching attestations: ... accepted
    # signatures do not match threshold, Found: 0" (pkg/cosign/verify.go)
    assert "no matching" in verified.stderr, verified.stderr


def test_the_sbom_attestation_verifies_and_lists_the_locked_components() -> None:
    verified = cosign("verify-attestation", "--key", PUBLIC_KEY, "--type", "cyclonedx",
                      "--insecure-ignore-tlog=true")
    assert verified.returncode == 0, verified.stderr
    envelope = json.loads(verified.stdout.splitlines()[0])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["predicateType"] == "https://cyclonedx.org/bom"
    assert statement["subject"][0]["digest"]["sha256"] == digest().removeprefix("sha256:")
    components = statement["predicate"]["components"]
    assert statement["predicate"]["metadata"]["component"]["name"] == "berthmaster"
    assert "kopf" in {c["name"] for c in components}
    print(f"the attested SBOM lists {len(components)} components")
