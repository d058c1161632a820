"""``make publish`` (hack/publish.py) against a real registry: the CNCF distribution registry
on loopback (berthmaster.tooling.devcluster.registry), cosign v3.1.3 and helm, all built from
the pinned wrapper modules. A one-file image stands in for berthmaster's (the push, signature
and attestation do not depend on its size); the chart and the SBOM are the real ones.

cosign's flags: cmd/cosign/cli/options/sign.go, attest.go, registry.go (v3.1.3); verification
by key with no transparency log is ``--insecure-ignore-tlog`` (options/verify.go).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from berthmaster.tooling.devcluster import build, images
from berthmaster.tooling.devcluster.registry import running_registry
from tests.integration.chart.chartkit import ROOT, helm_binary

SOURCE_IMAGE = "berthmaster.local/publish-probe:test"


def hack_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "hack" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve the module by name
    spec.loader.exec_module(module)
    return module


def test_publish_signs_attests_and_pushes_the_chart(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tools = build.build_publishing(lambda line: None)
    helm, cosign = str(helm_binary()), str(tools["cosign"])
    dist = tmp_path / "dist"
    subprocess.run([helm, "package", str(ROOT / "charts" / "berthmaster"), "--destination",
                    str(dist)], check=True, capture_output=True)
    release = hack_module("release")
    version = release.versions()
    release.sbom(dist / f"berthmaster-{version}.cdx.json")
    images.one_file_image(SOURCE_IMAGE, {"probe": (b"probe\n", 0o644)}, ["/probe"])
    publish = hack_module("publish")
    monkeypatch.setenv("COSIGN", cosign)
    monkeypatch.setenv("HELM", helm)
    pushed = [SOURCE_IMAGE]
    try:
        with running_registry(tools["registry"], tmp_path / "registry") as address:
            target = publish.Target(address)
            pushed.append(target.image(version))
            digest = publish.publish(target, version, dist, offline=True,
                                     ephemeral_key=tmp_path / "key", source=SOURCE_IMAGE)
            verify = publish.verify_command(cosign, target, digest,
                                            str(tmp_path / "key" / "cosign.pub"), True)
            assert subprocess.run(verify, capture_output=True).returncode == 0
            attestation = [cosign, "verify-attestation", "--type", "cyclonedx",
                           *verify[2:]]
            assert subprocess.run(attestation, capture_output=True).returncode == 0
            # another key's signature is not there
            other = tmp_path / "other"
            other.mkdir()
            subprocess.run([cosign, "generate-key-pair"], cwd=other, check=True,
                           capture_output=True, env={**os.environ, "COSIGN_PASSWORD": ""})
            refused = publish.verify_command(cosign, target, digest,
                                             str(other / "cosign.pub"), True)
            assert subprocess.run(refused, capture_output=True).returncode != 0
            shown = subprocess.run([helm, "show", "chart", f"{target.charts}/berthmaster",
                                    "--version", version, "--plain-http"],
                                   capture_output=True, text=True, check=True).stdout
            assert f"version: {version}" in shown
    finally:
        subprocess.run(["docker", "image", "rm", "--force", *pushed], capture_output=True)
