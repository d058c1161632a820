"""hack/publish.py's plan: which commands publish the image, its signature, its SBOM
attestation and the chart, by digest, with plain HTTP for a loopback registry only.
Flags as cosign v3.1.3 defines them (cmd/cosign/cli/options/sign.go, attest.go, registry.go)
and helm v3.22 (pkg/cmd/push.go ``--plain-http``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


def publish() -> ModuleType:
    spec = importlib.util.spec_from_file_location("publish", ROOT / "hack" / "publish.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module by name
    spec.loader.exec_module(module)
    return module


def test_a_loopback_registry_offline_signs_attests_and_pushes_by_digest() -> None:
    module = publish()
    target = module.Target("127.0.0.1:5000")
    steps = module.plan(target, "0.1.0", DIGEST, dist=Path("/dist"), cosign="cosign",
                        helm="helm", key="k.key", offline=True)
    image = f"127.0.0.1:5000/berthmaster@{DIGEST}"
    assert steps == [
        ["cosign", "sign", "--yes", "--key", "k.key", "--use-signing-config=false",
         "--tlog-upload=false", "--allow-http-registry", "--allow-insecure-registry", image],
        ["cosign", "attest", "--yes", "--key", "k.key", "--type", "cyclonedx", "--predicate",
         "/dist/berthmaster-0.1.0.cdx.json", "--use-signing-config=false",
         "--tlog-upload=false", "--allow-http-registry", "--allow-insecure-registry", image],
        ["helm", "push", "/dist/berthmaster-0.1.0.tgz", "oci://127.0.0.1:5000/charts",
         "--plain-http"],
    ]


def test_a_remote_registry_gets_tls_and_the_transparency_log() -> None:
    module = publish()
    target = module.Target("ghcr.io/example")
    sign, attest, push = module.plan(target, "1.2.3", DIGEST, dist=Path("/d"), cosign="c",
                                     helm="h", key="env://K", offline=False)
    assert sign == ["c", "sign", "--yes", "--key", "env://K",
                    f"ghcr.io/example/berthmaster@{DIGEST}"]
    assert "--allow-http-registry" not in attest and "--tlog-upload=false" not in attest
    assert push == ["h", "push", "/d/berthmaster-1.2.3.tgz", "oci://ghcr.io/example/charts"]


@pytest.mark.parametrize(("registry", "plain"), [
    ("127.0.0.1:5000", True), ("127.1.2.3:80/x", True), ("localhost:5000", True),
    ("[::1]:5000", True), ("registry.example:5000", False), ("10.0.0.1:5000", False)])
def test_only_loopback_is_plain_http(registry: str, plain: bool) -> None:
    assert publish().Target(registry).plain_http is plain


@pytest.mark.parametrize("registry", ["", "http://127.0.0.1:5000", "127.0.0.1:5000/"])
def test_a_registry_with_a_scheme_is_refused(registry: str) -> None:
    module = publish()
    with pytest.raises(module.PublishError, match="host\\[:port\\]\\[/path\\]"):
        module.Target(registry)


def test_the_digest_is_the_one_docker_recorded_for_the_registry() -> None:
    module = publish()
    target = module.Target("127.0.0.1:5000")
    digests = [f"other/berthmaster@sha256:{'00' * 32}", f"127.0.0.1:5000/berthmaster@{DIGEST}"]
    assert module.pushed_digest(digests, target) == DIGEST
    with pytest.raises(module.PublishError, match="did the push succeed"):
        module.pushed_digest(digests[:1], target)


def test_verify_ignores_the_transparency_log_only_offline() -> None:
    module = publish()
    target = module.Target("127.0.0.1:5000")
    assert module.verify_command("c", target, DIGEST, "k.pub", True) == [
        "c", "verify", "--key", "k.pub", "--insecure-ignore-tlog=true",
        "--allow-http-registry", "--allow-insecure-registry",
        f"127.0.0.1:5000/berthmaster@{DIGEST}"]
