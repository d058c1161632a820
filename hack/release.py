#!/usr/bin/env python3
"""`make release`: the packaged chart, the image as an OCI archive and the release notes in dist/.

    python hack/release.py                 # everything (needs Docker for the image)
    python hack/release.py --skip-image    # chart and notes only
    python hack/release.py --dist DIR      # somewhere else than dist/

Checks first, writes nothing if one fails: Chart.yaml's version and appVersion and
pyproject.toml's version agree; CHANGELOG.md has a ``## <version>`` section (its text is the
release notes); deploy/manifests/ and the chart's files/crds/ are current
(``hack/render-manifests.py --check``), and so is the chart README's values table
(``hack/chart_readme.py --check``); ``helm lint --strict`` is clean.

Then, in ``dist/``:

- ``berthmaster-<version>.tgz``: ``helm package`` of charts/berthmaster;
- ``berthmaster-image-<version>.oci.tar``: the image ``berthmaster:<version>``, built with
  ``berthmaster dev image`` (the one way the image is made), saved by ``docker save`` and, when
  that Docker writes its own format (Docker before 25), rewritten as an OCI image layout
  (``oci-layout``, ``index.json``, ``blobs/sha256/``), which ``skopeo copy oci-archive:``,
  ``crane push`` or ``ctr import`` take as is;
- ``berthmaster-<version>.cdx.json``: the image's software bill of materials in CycloneDX
  JSON, made by cyclonedx-bom (``cyclonedx-py requirements``) from the hash-locked
  requirements the image installs (hack/image/requirements.lock), with berthmaster itself
  (pyproject.toml) as the root component;
- ``RELEASE-NOTES.md``: the CHANGELOG section, the upgrade and uninstall order, and the
  artifacts' sha256 sums (also in ``SHA256SUMS``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any
from berthmaster.tooling.python import BERTHMASTER_CLI

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "berthmaster"
CHANGELOG = ROOT / "CHANGELOG.md"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"

UPGRADE_AND_UNINSTALL = """\
## Upgrade

1. `helm upgrade berthmaster berthmaster-{version}.tgz -n berthmaster -f values.yaml` with
   your own values file, after reading the upgrade notes above (not `--reuse-values`, which
   keeps the installed version's defaults; `helm get values berthmaster -n berthmaster` prints
   what you set). The CRDs are part of the release (`crds.install`) and upgraded with it; with
   `crds.install=false`, apply them first:
   `helm template berthmaster berthmaster-{version}.tgz --show-only templates/crds.yaml | kubectl apply --server-side --force-conflicts -f -`.
2. From chart 0.1.0 (CRDs installed from `crds/`), add `--take-ownership` (Helm 3.17+) once:
   docs/deployment.md, "Upgrading from chart 0.1.0".

## Uninstall, in this order

1. While the operator still runs, delete berthmaster's MachineSets (so they make no new
   Machines), then its Machines: their finalizer is removed only by the operator, after the
   lifecycle hooks, the drain and the instance deletion. Uninstalled first, it leaves them
   stuck in deletion. Machines of another controller are not berthmaster's to delete.
2. Delete the Descheduler, ClusterAutoscaler and MachineAutoscaler resources (their Jobs,
   CronJobs, roles and annotations go with them).
3. `helm uninstall berthmaster -n berthmaster`.
4. Last, and only when no other controller uses them (the chart keeps them, `crds.keep`):
   `helm template berthmaster berthmaster-{version}.tgz --show-only templates/crds.yaml | kubectl delete -f -`.
"""


class ReleaseError(Exception):
    """A check failed; the message says which and how to fix it."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def simple_yaml_field(text: str, key: str) -> str:
    match = re.search(rf'^{key}:\s*"?([^"\n]+)"?\s*$', text, flags=re.MULTILINE)
    if not match:
        raise ReleaseError(f"no {key} found")
    return match.group(1).strip()


def versions() -> str:
    chart = (CHART / "Chart.yaml").read_text()
    version, app_version = simple_yaml_field(chart, "version"), simple_yaml_field(chart, "appVersion")
    package = simple_yaml_field((ROOT / "pyproject.toml").read_text().replace(" = ", ": "),
                                "version")
    if len({version, app_version, package}) != 1:
        raise ReleaseError(f"versions disagree: Chart.yaml version {version}, appVersion "
                           f"{app_version}, pyproject.toml {package}; set all three to one value")
    return version


def changelog_section(text: str, version: str) -> str:
    """The body of ``## <version>`` (up to the next ``## ``) in CHANGELOG.md."""
    match = re.search(rf"^## \[?{re.escape(version)}\]?[^\n]*\n(.*?)(?=^## |\Z)", text,
                      flags=re.MULTILINE | re.DOTALL)
    if not match or not match.group(1).strip():
        raise ReleaseError(f"CHANGELOG.md has no '## {version}' section: write the release's "
                           "changes and upgrade notes there first")
    return match.group(1).strip()


def docker_archive_to_oci(source: Path, target: Path, reference: str) -> str:
    """Rewrite a ``docker save`` archive as an OCI image layout archive; returns the manifest
    digest. An archive that already is an OCI layout (Docker 25+) is copied unchanged."""
    with tarfile.open(source) as tar:
        names = set(tar.getnames())
        if {"oci-layout", "index.json"} <= names:
            shutil.copyfile(source, target)
            index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
            return str(index["manifests"][0]["digest"])

        def read(name: str) -> bytes:
            member = tar.extractfile(name)
            if member is None:
                raise ReleaseError(f"{source}: {name} is missing")
            return member.read()

        (entry,) = json.loads(read("manifest.json"))
        config = read(entry["Config"])
        layers = [read(name) for name in entry["Layers"]]
    blobs: dict[str, bytes] = {}

    def blob(data: bytes, media_type: str) -> dict[str, Any]:
        digest = f"sha256:{sha256_bytes(data)}"
        blobs[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": blob(config, OCI_CONFIG),
                "layers": [blob(layer, OCI_LAYER) for layer in layers]}
    manifest_descriptor = blob(json.dumps(manifest, separators=(",", ":")).encode(), OCI_MANIFEST)
    manifest_descriptor["annotations"] = {"org.opencontainers.image.ref.name": reference}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [manifest_descriptor]}
    files = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
             "index.json": json.dumps(index, indent=2).encode(),
             **{f"blobs/sha256/{digest.split(':', 1)[1]}": data
                for digest, data in blobs.items()}}
    with tarfile.open(target, "w") as out:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            out.addfile(info, io.BytesIO(data))
    return str(manifest_descriptor["digest"])


def helm_binary() -> str:
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    sys.path.insert(0, str(ROOT))
    from berthmaster.tooling.devcluster.build import binary_path

    return str(binary_path("helm"))


def run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ReleaseError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


LOCK = ROOT / "hack" / "image" / "requirements.lock"
# The image's Python (berthmaster.tooling.devcluster.images.PYTHON_VERSION, the Dockerfile's
# python:3.13 base): the lock is universal, so its environment markers are evaluated for it.
IMAGE_PYTHON = "3.13"


def image_environment(python: str = IMAGE_PYTHON) -> dict[str, str]:
    """The PEP 508 marker environment of the image's CPython on Linux (packaging.markers
    names); the machine is left to the host's, as the lock is the same on amd64 and arm64."""
    from packaging.markers import default_environment

    environment = dict(default_environment())
    environment.update(python_version=python, python_full_version=f"{python}.0",
                       implementation_name="cpython", platform_python_implementation="CPython",
                       sys_platform="linux", platform_system="Linux", os_name="posix")
    return environment


def lock_for_image(text: str, environment: dict[str, str]) -> str:
    """The lock without the requirements whose marker is false in ``environment`` (pip skips
    them at install: pip's req_install.match_markers), each with its hash and comment lines."""
    from packaging.markers import Marker

    kept: list[str] = []
    keep = True
    for line in text.splitlines(keepends=True):
        if line[:1] not in ("", " ", "#", "\n", "-"):
            requirement = line.rstrip().removesuffix("\\")
            marker = requirement.split(";", 1)[1].strip() if ";" in requirement else ""
            keep = not marker or Marker(marker).evaluate(environment)
        elif not line.startswith(" "):
            keep = True
        if keep:
            kept.append(line)
    return "".join(kept)


def sbom(target: Path) -> int:
    """Write the image's CycloneDX SBOM from its lock (see the module docstring), with only the
    requirements the image's Python installs; returns the number of components beside the
    root."""
    with tempfile.TemporaryDirectory() as scratch:
        lock = Path(scratch) / "requirements.lock"
        lock.write_text(lock_for_image(LOCK.read_text(), image_environment()))
        run(sys.executable, "-m", "cyclonedx_py", "requirements", str(lock),
            "--pyproject", str(ROOT / "pyproject.toml"), "--output-reproducible", "--of",
            "JSON", "-o", str(target))
    document = json.loads(target.read_text())
    if document.get("bomFormat") != "CycloneDX" or not document.get("components"):
        raise ReleaseError(f"{target.name} is not a CycloneDX document with components")
    return len(document["components"])


def release(dist: Path, with_image: bool) -> list[Path]:
    version = versions()
    notes = changelog_section(CHANGELOG.read_text(), version)
    run(sys.executable, str(ROOT / "hack" / "render-manifests.py"), "--check")
    run(sys.executable, str(ROOT / "hack" / "chart_readme.py"), "--check")
    helm = helm_binary()
    run(helm, "lint", "--strict", str(CHART))
    dist.mkdir(parents=True, exist_ok=True)
    artifacts = []
    run(helm, "package", str(CHART), "--destination", str(dist))
    artifacts.append(dist / f"berthmaster-{version}.tgz")
    bom = dist / f"berthmaster-{version}.cdx.json"
    components = sbom(bom)
    notes += (f"\n\nSoftware bill of materials: `{bom.name}` (CycloneDX), {components} "
              "components locked in the image beside berthmaster itself.")
    artifacts.append(bom)
    if with_image:
        tag = f"berthmaster:{version}"
        run(*BERTHMASTER_CLI, "dev", "image", "--tag", tag)
        with tempfile.TemporaryDirectory() as scratch:
            saved = Path(scratch) / "image.tar"
            run("docker", "save", "--output", str(saved), tag)
            image = dist / f"berthmaster-image-{version}.oci.tar"
            digest = docker_archive_to_oci(saved, image, tag)
        notes += f"\n\nImage `{tag}`: OCI manifest `{digest}`."
        artifacts.append(image)
    sums = "".join(f"{sha256_file(path)}  {path.name}\n" for path in artifacts)
    (dist / "SHA256SUMS").write_text(sums)
    text = (f"# berthmaster {version}\n\n{notes}\n\n"
            + UPGRADE_AND_UNINSTALL.format(version=version)
            + f"\n## Artifacts (sha256)\n\n```\n{sums}```\n")
    (dist / "RELEASE-NOTES.md").write_text(text)
    return [*artifacts, dist / "SHA256SUMS", dist / "RELEASE-NOTES.md"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--skip-image", action="store_true",
                        help="no image (no Docker needed): the chart and the notes only")
    args = parser.parse_args()
    try:
        written = release(args.dist, with_image=not args.skip_image)
    except ReleaseError as error:
        print(f"release: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
