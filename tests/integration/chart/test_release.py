"""``make release`` (hack/release.py): the packaged chart, the image as an OCI archive and the
release notes in dist/, refused when a check fails.

The image step needs Docker and minutes of build, so it is not run here; what it adds beyond
``berthmaster dev image`` (tested in the image tests) is the rewrite of a ``docker save``
archive into an OCI image layout (image-spec ``image-layout.md``: ``oci-layout``,
``index.json``, content-addressed ``blobs/sha256/``), checked on a synthetic archive.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.integration.chart.chartkit import ROOT, helm_binary

LOCK = ROOT / "hack" / "image" / "requirements.lock"


def release_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", ROOT / "hack" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_release_writes_the_chart_the_notes_and_the_sums(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    result = subprocess.run([sys.executable, str(ROOT / "hack" / "release.py"), "--skip-image",
                             "--dist", str(dist)], capture_output=True, text=True, check=False,
                            env={**os.environ, "HELM": str(helm_binary())})
    assert result.returncode == 0, result.stdout + result.stderr
    chart = dist / "berthmaster-0.1.0.tgz"
    assert chart.is_file()
    bom = dist / "berthmaster-0.1.0.cdx.json"
    sums = (dist / "SHA256SUMS").read_text()
    assert sums == "".join(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"
                           for path in (chart, bom))
    # the SBOM (CycloneDX 1.6, cyclonedx-bom) lists every package the image's lock pins for
    # its Python 3.13, at its pinned version, under berthmaster itself: typing-extensions
    # (``; python_full_version < '3.13'``) is not installed there, so it is not listed
    document = json.loads(bom.read_text())
    assert (document["bomFormat"], document["specVersion"]) == ("CycloneDX", "1.6")
    assert document["metadata"]["component"]["name"] == "berthmaster"
    locked = set(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", LOCK.read_text(), re.M))
    locked = {(name, version) for name, version in locked if name != "typing-extensions"}
    listed = {(c["name"], c["version"]) for c in document["components"]}
    assert {(n.lower().replace("_", "-"), v) for n, v in locked} == {
        (n.lower().replace("_", "-"), v) for n, v in listed}
    notes = (dist / "RELEASE-NOTES.md").read_text()
    assert notes.startswith("# berthmaster 0.1.0\n")
    assert "### Upgrade notes" in notes  # the CHANGELOG section
    order = [notes.index(step) for step in (
        "delete berthmaster's MachineSets", "Delete the Descheduler", "helm uninstall",
        "--show-only templates/crds.yaml | kubectl delete -f -")]
    assert order == sorted(order), "uninstall steps out of order"
    # A release is used without a checkout: its upgrade and uninstall steps name no deploy/
    # path, and upgrade with the user's values, not --reuse-values (it would keep the
    # installed version's defaults).
    steps = notes[notes.index("\n## Upgrade\n"):notes.index(sums)]
    assert "deploy/" not in steps
    assert ("helm template berthmaster berthmaster-0.1.0.tgz --show-only templates/crds.yaml"
            " | kubectl apply --server-side --force-conflicts -f -") in steps
    (upgrade,) = [line for line in steps.splitlines() if "helm upgrade" in line]
    assert "-f values.yaml" in upgrade and "--reuse-values" not in upgrade
    assert sums in notes
    assert f"{len(locked)} components locked in the image" in notes


def test_a_version_without_a_changelog_section_is_refused() -> None:
    release = release_module()
    missing = re.escape("CHANGELOG.md has no '## 9.9.9' section")
    with pytest.raises(release.ReleaseError, match=missing):
        release.changelog_section("# Changelog\n\n## 0.1.0\n\nfirst\n", "9.9.9")
    assert release.changelog_section("## 0.2.0\n\nsecond\n\n## 0.1.0\n\nfirst\n",
                                     "0.2.0") == "second"


def tar_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_docker_save_archive_becomes_an_oci_image_layout(tmp_path: Path) -> None:
    layer = tar_bytes({"usr/bin/berthmaster": b"#!/bin/sh\n"})
    layer_id = hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_id}"]},
                         "config": {"Entrypoint": ["berthmaster"]}}).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    saved = tmp_path / "saved.tar"
    saved.write_bytes(tar_bytes({
        "manifest.json": json.dumps([{"Config": config_name, "RepoTags": ["berthmaster:0.1.0"],
                                      "Layers": ["abc/layer.tar"]}]).encode(),
        config_name: config, "abc/layer.tar": layer}))
    target = tmp_path / "image.oci.tar"
    digest = release_module().docker_archive_to_oci(saved, target, "berthmaster:0.1.0")

    with tarfile.open(target) as tar:
        def read(name: str) -> bytes:
            member = tar.extractfile(name)
            assert member is not None, name
            return member.read()

        assert json.loads(read("oci-layout")) == {"imageLayoutVersion": "1.0.0"}
        (entry,) = json.loads(read("index.json"))["manifests"]
        assert entry["digest"] == digest
        assert entry["annotations"]["org.opencontainers.image.ref.name"] == "berthmaster:0.1.0"
        manifest_bytes = read(f"blobs/sha256/{digest.split(':')[1]}")
        assert f"sha256:{hashlib.sha256(manifest_bytes).hexdigest()}" == digest
        assert entry["size"] == len(manifest_bytes)
        manifest = json.loads(manifest_bytes)
        assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        assert read(f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}") == config
        (layer_entry,) = manifest["layers"]
        assert layer_entry["digest"] == f"sha256:{layer_id}"  # the config's diff_id
        assert layer_entry["mediaType"] == "application/vnd.oci.image.layer.v1.tar"
        assert read(f"blobs/sha256/{layer_id}") == layer
