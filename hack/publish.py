#!/usr/bin/env python3
"""`make publish REGISTRY=host:port/path`: the image, its signature and SBOM, and the chart in
an OCI registry.

    python hack/publish.py --registry 127.0.0.1:5000          # after `make release`
    python hack/publish.py --registry ghcr.io/ORG --dist DIR

Takes what `make release` wrote in dist/ (the packaged chart and the CycloneDX SBOM) and the
image ``berthmaster:<version>`` it built in Docker, then:

1. ``docker tag`` + ``docker push`` ``<registry>/berthmaster:<version>``; the pushed manifest's
   digest is read back from ``docker inspect`` (RepoDigests), and everything after refers to
   the image by that digest;
2. ``cosign sign --key`` the digest, with the key pair named by ``COSIGN_KEY`` (and its
   ``COSIGN_PASSWORD``), or, with ``--ephemeral-key DIR``, a pair generated there for this run
   (`make e2e`);
3. ``cosign attest --type cyclonedx --predicate <sbom>``: the SBOM as a signed in-toto
   attestation of the image (``cosign attach sbom`` is deprecated since cosign 2.x:
   cosign cmd/cosign/cli/attach.go);
4. ``helm push`` the chart to ``oci://<registry>/charts``.

With ``--offline`` (no Rekor reachable, as in `make e2e`), cosign neither fetches the public
signing config nor uploads to the transparency log (``--use-signing-config=false
--tlog-upload=false``); such signatures are verified with ``cosign verify --key ...
--insecure-ignore-tlog=true``. A loopback registry is spoken to over plain HTTP (helm
``--plain-http``, cosign ``--allow-http-registry``; Docker treats 127.0.0.0/8 as insecure by
default).

The commands are planned by pure functions (:func:`plan`), run by :func:`publish`.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "berthmaster"


class PublishError(Exception):
    """A step failed or an input is wrong; the message says which and what to do."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where to publish: ``host[:port][/path]``, no scheme."""

    registry: str

    def __post_init__(self) -> None:
        if not self.registry or "://" in self.registry or self.registry.endswith("/"):
            raise PublishError(f"REGISTRY={self.registry!r}: give host[:port][/path], with no "
                               "scheme and no trailing slash (e.g. 127.0.0.1:5000)")

    @property
    def host(self) -> str:
        return self.registry.split("/", 1)[0]

    @property
    def plain_http(self) -> bool:
        """A loopback registry (localhost, 127.0.0.0/8, ::1) is spoken to over HTTP."""
        name = self.host.rsplit(":", 1)[0] if not self.host.startswith("[") else (
            self.host[1:].split("]", 1)[0])
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def image(self, version: str) -> str:
        return f"{self.registry}/{IMAGE}:{version}"

    def by_digest(self, digest: str) -> str:
        return f"{self.registry}/{IMAGE}@{digest}"

    @property
    def charts(self) -> str:
        return f"oci://{self.registry}/charts"


def cosign_registry_flags(target: Target) -> list[str]:
    return ["--allow-http-registry", "--allow-insecure-registry"] if target.plain_http else []


def cosign_offline_flags(offline: bool) -> list[str]:
    return ["--use-signing-config=false", "--tlog-upload=false"] if offline else []


def sign_command(cosign: str, target: Target, digest: str, key: str,
                 offline: bool) -> list[str]:
    return [cosign, "sign", "--yes", "--key", key, *cosign_offline_flags(offline),
            *cosign_registry_flags(target), target.by_digest(digest)]


def attest_command(cosign: str, target: Target, digest: str, key: str, sbom: Path,
                   offline: bool) -> list[str]:
    return [cosign, "attest", "--yes", "--key", key, "--type", "cyclonedx", "--predicate",
            str(sbom), *cosign_offline_flags(offline), *cosign_registry_flags(target),
            target.by_digest(digest)]


def verify_command(cosign: str, target: Target, digest: str, public_key: str,
                   offline: bool) -> list[str]:
    return [cosign, "verify", "--key", public_key,
            *(["--insecure-ignore-tlog=true"] if offline else []),
            *cosign_registry_flags(target), target.by_digest(digest)]


def helm_push_command(helm: str, target: Target, chart: Path) -> list[str]:
    return [helm, "push", str(chart), target.charts,
            *(["--plain-http"] if target.plain_http else [])]


def pushed_digest(repo_digests: list[str], target: Target) -> str:
    """The digest Docker recorded for ``<registry>/berthmaster`` after the push."""
    prefix = f"{target.registry}/{IMAGE}@"
    for entry in repo_digests:
        if entry.startswith(prefix):
            return entry.removeprefix(prefix)
    raise PublishError(f"docker recorded no digest for {prefix[:-1]} (RepoDigests: "
                       f"{repo_digests}); did the push succeed?")


def plan(target: Target, version: str, digest: str, *, dist: Path, cosign: str, helm: str,
         key: str, offline: bool) -> list[list[str]]:
    """The steps after the image push, in order (the module docstring)."""
    sbom = dist / f"{IMAGE}-{version}.cdx.json"
    chart = dist / f"{IMAGE}-{version}.tgz"
    return [sign_command(cosign, target, digest, key, offline),
            attest_command(cosign, target, digest, key, sbom, offline),
            helm_push_command(helm, target, chart)]


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise PublishError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def tools() -> tuple[str, str]:
    """cosign and helm: $COSIGN / $HELM, or built (cached) from hack/cosign and hack/helm."""
    sys.path.insert(0, str(ROOT))
    from berthmaster.tooling.devcluster.build import COSIGN_FAMILY, binary_path, build_family

    cosign = os.environ.get("COSIGN")
    if not cosign:
        build_family(COSIGN_FAMILY, lambda line: print(line, file=sys.stderr))
        cosign = str(binary_path("cosign"))
    return cosign, os.environ.get("HELM") or str(binary_path("helm"))


def generate_key(cosign: str, folder: Path, password: str) -> Path:
    """A fresh key pair in ``folder`` (cosign.key, cosign.pub); returns the private key."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([cosign, "generate-key-pair", "--output-key-prefix",
                    str(folder / "cosign")], cwd=folder, check=True, capture_output=True,
                   env={**os.environ, "COSIGN_PASSWORD": password})
    return folder / "cosign.key"


def publish(target: Target, version: str, dist: Path, *, offline: bool,
            ephemeral_key: Path | None, source: str = "") -> str:
    """Publish (the module docstring); returns the image's digest."""
    for artefact in (dist / f"{IMAGE}-{version}.tgz", dist / f"{IMAGE}-{version}.cdx.json"):
        if not artefact.is_file():
            raise PublishError(f"{artefact} is missing: run `make release` first")
    cosign, helm = tools()
    env = dict(os.environ)
    if ephemeral_key is not None:
        env["COSIGN_PASSWORD"] = env.get("COSIGN_PASSWORD", "")
        key = str(generate_key(cosign, ephemeral_key, env["COSIGN_PASSWORD"]))
    elif env.get("COSIGN_KEY"):
        key = env["COSIGN_KEY"]
    else:
        raise PublishError("no signing key: set COSIGN_KEY (and COSIGN_PASSWORD) to a cosign "
                           "key pair's private key, or pass --ephemeral-key DIR")
    run(["docker", "tag", source or f"{IMAGE}:{version}", target.image(version)])
    run(["docker", "push", target.image(version)])
    digests = json.loads(run(["docker", "inspect", "--format", "{{json .RepoDigests}}",
                              target.image(version)]))
    digest = pushed_digest(digests, target)
    for command in plan(target, version, digest, dist=dist, cosign=cosign, helm=helm, key=key,
                        offline=offline):
        run(command, env=env)
    return digest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", required=True, help="host[:port][/path]")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--offline", action="store_true",
                        help="no Rekor and no public signing config (local registries)")
    parser.add_argument("--ephemeral-key", type=Path, metavar="DIR",
                        help="generate a key pair in DIR instead of reading COSIGN_KEY")
    parser.add_argument("--image", default="",
                        help="the local image to push (default: berthmaster:<version>)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "hack"))
    from release import versions  # type: ignore[import-not-found,unused-ignore]

    try:
        digest = publish(Target(args.registry), versions(), args.dist, offline=args.offline,
                         ephemeral_key=args.ephemeral_key, source=args.image)
    except PublishError as error:
        print(f"publish: {error}", file=sys.stderr)
        return 1
    print(f"published {args.registry}/{IMAGE}@{digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
