"""Build berthmaster's image, and the few images its local nodes need, with or without a registry.

Design: ``docker build`` of the repository's Dockerfile is the one way the image is made, for
users and here alike. What differs on a machine that reaches no image registry is only where
the two inputs come from, and both are decided here, before the build:

- **the Python base** (the Dockerfile's ``PYTHON_IMAGE`` build argument): the official
  ``python:3.13-slim-trixie`` when it is present or can be pulled; otherwise a local base made
  from Debian's packages (``debootstrap`` of trixie, whose python3 is 3.13, with python3,
  python3-venv and ca-certificates, trimmed of documentation and apt lists) and
  ``docker import``ed under a tag that carries a hash of its recipe, so a machine builds it
  once and a changed recipe builds a new one;
- **the wheels**: the Dockerfile installs exactly the lock files in ``hack/image/`` with
  ``--require-hashes``. When ``hack/image/wheelhouse/`` holds wheels, it installs from there
  with no index (hashes still checked); ``make image`` fills it on the host, whose pip trusts
  the machine's certificate store, so the container never needs network or a CA bundle.

Small images serve the real kubelets of the local control plane (berthmaster.tooling.devcluster.
kubelet): ``pause`` (the sandbox process, compiled from ``hack/image/pause.c``), ``kwok`` (the
kwok binary the control plane already builds), and kind's default storage
(berthmaster.tooling.devcluster.local_path): ``local-path-provisioner`` (built from the Go module
proxy)
and its helper (Debian's ``busybox-static``: one static binary, where kind ships a distroless
image with sh, mkdir and rm), each a one-file ``docker import``.

Every step says what it does and how long it took; a missing Docker daemon or a failed build is
an :class:`ImageError` whose message says what to do.
"""

from __future__ import annotations

import dataclasses
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
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from berthmaster.tooling.devcluster import build
from berthmaster.tooling.devcluster.paths import hack_dir

LOCKS = ("requirements-build.lock", "requirements.lock")

# One Python for both bases: the official image's and Debian trixie's python3 are both 3.13, so
# the wheels below fit either (docs/deployment.md).
PYTHON_VERSION = "3.13"
OFFICIAL_BASE = f"python:{PYTHON_VERSION}-slim-trixie"
DEBIAN_SUITE = "trixie"
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Removed from the debootstrapped root before import: nothing at run time reads them.
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
        "var/cache/apt", "var/lib/apt/lists", "var/cache/debconf/templates.dat-old",
        "var/log")
# The wheels the image installs: CPython 3.13 on x86-64 glibc (trixie's glibc is 2.41).
WHEEL_PLATFORM = ("--only-binary=:all:", "--implementation", "cp",
                  "--python-version", PYTHON_VERSION,
                  "--abi", f"cp{PYTHON_VERSION.replace('.', '')}", "--abi", "abi3", "--abi", "none",
                  "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
                  "--platform", "manylinux_2_28_x86_64", "--platform", "any")

PAUSE_IMAGE = "berthmaster.local/pause:dev"
KWOK_IMAGE = "berthmaster.local/kwok:dev"
LOCAL_PATH_IMAGE = f"berthmaster.local/local-path-provisioner:{build.LOCAL_PATH_VERSION}"
# The helper pods' image: Debian's statically linked busybox, alone, with the three commands
# the provisioner's setup and teardown scripts run (kind's local-path-helper image holds sh,
# mkdir and rm too: images/local-path-helper/Dockerfile of sigs.k8s.io/kind).
LOCAL_PATH_HELPER_IMAGE = "berthmaster.local/local-path-helper:busybox-static"
HELPER_PACKAGE = "busybox-static"
HELPER_COMMANDS = ("sh", "mkdir", "rm")

Say = Callable[[str], None]


def image_dir() -> Path:
    """``hack/image/`` of the source checkout: the locks, the wheelhouse, pause.c."""
    return hack_dir() / "image"


def source_root() -> Path:
    return hack_dir().parent


class ImageError(RuntimeError):
    """An image could not be built or checked; the message says why and what to do."""


def docker(*args: str, input: bytes | None = None, timeout: float | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the docker CLI; never raises for a non-zero exit (callers read ``returncode``)."""
    if shutil.which("docker") is None:
        raise ImageError("docker is not on PATH: install Docker (Debian: apt-get install "
                         "docker.io) and start dockerd; hack/docker-up.sh does both as root")
    return subprocess.run(["docker", *args], input=input, capture_output=True, timeout=timeout,
                          check=False, env=env)


def require_docker() -> None:
    result = docker("info", "--format", "{{.ServerVersion}}", timeout=60)
    if result.returncode != 0:
        raise ImageError("the Docker daemon does not answer (`docker info` failed: "
                         f"{result.stderr.decode(errors='replace').strip()[:200]}); start it "
                         "(hack/docker-up.sh, as root) and retry")


def image_exists(name: str) -> bool:
    return docker("image", "inspect", name, timeout=60).returncode == 0


def image_size(name: str) -> int:
    result = docker("image", "inspect", name, "--format", "{{.Size}}", timeout=60)
    if result.returncode != 0:
        raise ImageError(f"image {name} is not there: {result.stderr.decode().strip()}")
    return int(result.stdout.decode().strip())


# -- the Python base -----------------------------------------------------------------------
def debian_mirror(sources: Sequence[Path] = (Path("/etc/apt/sources.list.d/debian.sources"),
                                             Path("/etc/apt/sources.list"))) -> str:
    """The Debian archive this machine's apt uses (``$BERTHMASTER_DEBIAN_MIRROR`` first)."""
    configured = os.environ.get("BERTHMASTER_DEBIAN_MIRROR")
    if configured:
        return configured
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        found = mirror_from_sources(text)
        if found:
            return found
    return DEFAULT_MIRROR


def mirror_from_sources(text: str) -> str | None:
    """The main archive's URI in a deb822 ``.sources`` file or a one-line ``sources.list``."""
    for line in text.splitlines():
        line = line.strip()
        deb822 = re.match(r"URIs:\s*(\S+)", line)
        if deb822 and "security" not in deb822.group(1):
            return deb822.group(1).rstrip("/")
        one_line = re.match(r"deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
        if one_line and "security" not in one_line.group(1):
            return one_line.group(1).rstrip("/")
    return None


def local_base_tag(suite: str = DEBIAN_SUITE, packages: Sequence[str] = DEBIAN_PACKAGES,
                   trim: Sequence[str] = TRIM) -> str:
    """The local base's tag: a hash of its recipe (not of the mirror: any mirror serves the
    same suite), so one machine builds each recipe once."""
    recipe = json.dumps({"suite": suite, "packages": list(packages), "trim": list(trim),
                         "variant": "minbase"}, sort_keys=True)
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return f"berthmaster.local/python-base:{PYTHON_VERSION}-{suite}-{key}"


def python_base(say: Say) -> str:
    """The base to build on: the official image if present or pullable, else the local one."""
    if image_exists(OFFICIAL_BASE):
        say(f"  base: {OFFICIAL_BASE} (present)")
        return OFFICIAL_BASE
    pulled = docker("pull", OFFICIAL_BASE, timeout=300)
    if pulled.returncode == 0:
        say(f"  base: {OFFICIAL_BASE} (pulled)")
        return OFFICIAL_BASE
    reason = pulled.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no answer"]
    tag = local_base_tag()
    if image_exists(tag):
        say(f"  base: {tag} (local Debian base, cached; {OFFICIAL_BASE} cannot be pulled)")
        return tag
    say(f"  base: {OFFICIAL_BASE} cannot be pulled ({reason[0][:120]}); building {tag} from "
        "Debian packages with debootstrap (about 3 minutes, once) ...")
    build_local_base(tag, say)
    return tag


def build_local_base(tag: str, say: Say) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageError("no registry answers and debootstrap is not installed: install it "
                         "(apt-get install debootstrap) to build the local Python base")
    if os.geteuid() != 0:
        raise ImageError("building the local Python base runs debootstrap, which needs root")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="berthmaster-base-") as scratch:
        root = Path(scratch) / "root"
        command = ["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
                   DEBIAN_SUITE, str(root), debian_mirror()]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise ImageError(f"debootstrap failed (exit {result.returncode}):\n{tail}")
        for relative in TRIM:
            target = root / relative
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
            elif target.exists():
                target.unlink()
        tarball = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."],
                                   stdout=subprocess.PIPE)
        assert tarball.stdout is not None
        imported = subprocess.run(
            ["docker", "import", "--change", 'CMD ["python3"]',
             "--change", "ENV LANG=C.UTF-8", "-", tag],
            stdin=tarball.stdout, capture_output=True, check=False)
        tarball.stdout.close()
        tarball.wait()
        if imported.returncode != 0 or tarball.returncode != 0:
            raise ImageError(f"docker import of the local base failed: "
                             f"{imported.stderr.decode(errors='replace').strip()}")
    say(f"  base: {tag} built in {time.monotonic() - started:.0f}s "
        f"({image_size(tag) / 2**20:.0f} MiB)")


# -- wheels --------------------------------------------------------------------------------
def fill_wheelhouse(say: Say, python: str = sys.executable) -> None:
    """Download every locked wheel (hash-checked) into hack/image/wheelhouse/ on the host."""
    started = time.monotonic()
    wheelhouse = image_dir() / "wheelhouse"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    command = [python, "-m", "pip", "download", "--quiet", "--require-hashes", "--no-deps",
               *WHEEL_PLATFORM, "--dest", str(wheelhouse)]
    for lock in LOCKS:
        command += ["-r", str(image_dir() / lock)]
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PIP_FIND_LINKS", None)
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise ImageError(f"downloading the locked wheels failed:\n{tail}\nCheck that PyPI is "
                         "reachable; the locks are hack/image/*.lock (see hack/image/README.md)")
    count = len(list(wheelhouse.glob("*.whl")))
    say(f"  wheels: {count} locked wheels in {wheelhouse} "
        f"({time.monotonic() - started:.0f}s)")


# -- the image -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ImageReport:
    name: str
    base: str
    size_bytes: int
    build_seconds: float


def version_build_args() -> list[str]:
    """The Dockerfile's VERSION and REVISION arguments (its OCI labels): the package's version
    and the checkout's commit, ``unknown`` outside a git checkout."""
    from berthmaster import __version__

    revision = subprocess.run(["git", "-C", str(source_root()), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=False)
    commit = revision.stdout.strip() if revision.returncode == 0 else ""
    return [f"VERSION={__version__}", f"REVISION={commit or 'unknown'}"]


def build_image(name: str, say: Say, base: str | None = None) -> ImageReport:
    """Build the repository's Dockerfile as ``name`` (legacy builder: it needs no frontend
    image from a registry), then check it as the chart runs it."""
    require_docker()
    base = base or python_base(say)
    fill_wheelhouse(say)
    started = time.monotonic()
    say(f"  image: docker build -t {name} (base {base}) ...")
    env = dict(os.environ, DOCKER_BUILDKIT="0")
    result = docker("build", "--build-arg", f"PYTHON_IMAGE={base}",
                    *(f"--build-arg={arg}" for arg in version_build_args()),
                    "-t", name, str(source_root()), env=env, timeout=1800)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.decode(errors="replace").strip().splitlines()[-25:]
                         + result.stderr.decode(errors="replace").strip().splitlines()[-10:])
        raise ImageError(f"docker build failed (exit {result.returncode}):\n{tail}")
    seconds = time.monotonic() - started
    check_image(name)
    size = image_size(name)
    say(f"  image: {name} built in {seconds:.0f}s, {size / 2**20:.0f} MiB; runs read-only as "
        "uid 65532, has no pip and no compiler")
    return ImageReport(name, base, size, seconds)


def run_in_image(name: str, *command: str, entrypoint: str | None = None
                 ) -> subprocess.CompletedProcess[bytes]:
    """Run ``command`` in the image the way the chart runs it: read-only root, a /tmp tmpfs,
    uid 65532, every capability dropped, no network."""
    args = ["run", "--rm", "--read-only", "--tmpfs", "/tmp", "--user", "65532:65532",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--network", "none"]
    if entrypoint is not None:
        args += ["--entrypoint", entrypoint]
    return docker(*args, name, *command, timeout=120)


def check_image(name: str) -> None:
    """The promises the image makes: the three components import and the CLI answers when run
    read-only as non-root, and that uid has a name; neither pip nor a C compiler is left in
    it."""
    version = run_in_image(name, "version")
    if version.returncode != 0:
        raise ImageError(f"`berthmaster version` fails in {name} run read-only as uid 65532:\n"
                         f"{version.stderr.decode(errors='replace').strip()[-2000:]}")
    components = ("berthmaster.scheduler.daemon.command", "berthmaster.operator.command",
                  "berthmaster.scheduler.descheduler.command")
    imports = run_in_image(name, "-c", f"import {', '.join(components)}", entrypoint="python3")
    if imports.returncode != 0:
        raise ImageError(f"the components do not import in {name}:\n"
                         f"{imports.stderr.decode(errors='replace').strip()[-2000:]}")
    who = run_in_image(name, "-c", "import getpass; print(getpass.getuser())",
                       entrypoint="python3")
    if who.returncode != 0:
        raise ImageError(f"uid 65532 has no name in {name} (kopf asks for it): "
                         f"{who.stderr.decode(errors='replace').strip()[-300:]}")
    leftovers = run_in_image(name, "-c", "import importlib.util, shutil; print(','.join("
                             "[n for n in ('pip', 'ensurepip') if importlib.util.find_spec(n)] + "
                             "[t for t in ('pip', 'pip3', 'gcc', 'cc') if shutil.which(t)]))",
                             entrypoint="python3")
    found = leftovers.stdout.decode().strip()
    if leftovers.returncode != 0 or found:
        raise ImageError(f"{name} still holds build tools ({found or leftovers.stderr.decode()})")
    tooling = run_in_image(name, "-c", "import importlib.util; "
                           "print(importlib.util.find_spec('berthmaster.tooling') is None)",
                           entrypoint="python3")
    if tooling.stdout.decode().strip() != "True":
        raise ImageError(f"{name} ships berthmaster.tooling (the local control plane, the demo): "
                         ".dockerignore must leave it out")
    labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", name)
    found_labels = json.loads(labels.stdout.decode() or "null") or {}
    # the revision is "unknown" where the sources are not a git checkout
    missing = [f"org.opencontainers.image.{key}" for key in ("version", "revision", "source")
               if not found_labels.get(f"org.opencontainers.image.{key}")
               or (key != "revision" and found_labels[f"org.opencontainers.image.{key}"]
                   == "unknown")]
    if missing:
        raise ImageError(f"{name} lacks the OCI labels {', '.join(missing)}: build it with "
                         "`make image` (which passes VERSION and REVISION)")


# -- the node images -----------------------------------------------------------------------
def one_file_image(name: str, files: dict[str, tuple[bytes, int]], entrypoint: list[str],
                   links: dict[str, str] | None = None, env: dict[str, str] | None = None
                   ) -> None:
    """``docker import`` an image holding just ``files`` (path -> (content, mode)), the
    symbolic ``links`` (path -> target) and the environment ``env``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, 0
            archive.addfile(info, io.BytesIO(content))
        for path, target in sorted((links or {}).items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, 0
            archive.addfile(info)
    changes = [f"ENTRYPOINT {json.dumps(entrypoint)}",
               *(f"ENV {key}={value}" for key, value in sorted((env or {}).items()))]
    result = docker("import", *(arg for change in changes for arg in ("--change", change)),
                    "-", name, input=buffer.getvalue(), timeout=300)
    if result.returncode != 0:
        raise ImageError(f"docker import of {name} failed: {result.stderr.decode().strip()}")


def pause_image(say: Say) -> str:
    """The sandbox image, compiled statically from hack/image/pause.c."""
    require_docker()
    if shutil.which("gcc") is None:
        raise ImageError("gcc is needed to build the pod sandbox image (apt-get install gcc "
                         "libc6-dev)")
    with tempfile.TemporaryDirectory() as scratch:
        binary = Path(scratch) / "pause"
        result = subprocess.run(["gcc", "-Os", "-static", "-s", "-o", str(binary),
                                 str(image_dir() / "pause.c")], capture_output=True, text=True,
                                check=False)
        if result.returncode != 0:
            raise ImageError(f"compiling hack/image/pause.c failed:\n{result.stderr.strip()}")
        one_file_image(PAUSE_IMAGE, {"pause": (binary.read_bytes(), 0o755)}, ["/pause"])
    say(f"  image: {PAUSE_IMAGE} (hack/image/pause.c, static)")
    return PAUSE_IMAGE


def kwok_image(say: Say) -> str:
    """kwok for running inside a cluster: the binary the control plane builds, alone."""
    require_docker()
    binary = build.binary_path("kwok")
    if not binary.is_file():
        build.build_family(next(f for f in build.FAMILIES if f.name == "kwok"), say)
    one_file_image(KWOK_IMAGE, {"kwok": (binary.read_bytes(), 0o755)}, ["/kwok"])
    say(f"  image: {KWOK_IMAGE} (kwok built from hack/kwok)")
    return KWOK_IMAGE


def local_path_image(say: Say) -> str:
    """rancher's local-path-provisioner (kind's default provisioner), the binary alone."""
    require_docker()
    family = build.LOCAL_PATH_FAMILY
    binary = build.binary_path("local-path-provisioner")
    if not binary.is_file():
        build.build_family(family, say)
    one_file_image(LOCAL_PATH_IMAGE, {"local-path-provisioner": (binary.read_bytes(), 0o755)},
                   ["/local-path-provisioner"])
    say(f"  image: {LOCAL_PATH_IMAGE} (built from hack/{family.module})")
    return LOCAL_PATH_IMAGE


def local_path_helper_image(say: Say) -> str:
    """The helper pods' image: ``/bin/busybox`` from Debian's busybox-static package (fetched
    with ``apt-get download``, no installation) and links naming the commands it serves. Built
    once per machine: an image already there is reused."""
    require_docker()
    if image_exists(LOCAL_PATH_HELPER_IMAGE):
        say(f"  image: {LOCAL_PATH_HELPER_IMAGE} (present)")
        return LOCAL_PATH_HELPER_IMAGE
    for tool, package in (("apt-get", "apt"), ("dpkg-deb", "dpkg")):
        if shutil.which(tool) is None:
            raise ImageError(f"{tool} is needed to build {LOCAL_PATH_HELPER_IMAGE} from "
                             f"Debian's {HELPER_PACKAGE} (apt-get install {package})")
    with tempfile.TemporaryDirectory(prefix="berthmaster-helper-") as scratch:
        fetched = subprocess.run(["apt-get", "download", HELPER_PACKAGE], cwd=scratch,
                                 capture_output=True, text=True, check=False)
        debs = sorted(Path(scratch).glob(f"{HELPER_PACKAGE}_*.deb"))
        if fetched.returncode != 0 or not debs:
            raise ImageError(f"apt-get download {HELPER_PACKAGE} failed: "
                             f"{fetched.stderr.strip()[-400:]}; run apt-get update, or check "
                             "that the Debian mirror is reachable")
        unpacked = Path(scratch) / "root"
        extracted = subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)],
                                   capture_output=True, text=True, check=False)
        busybox = unpacked / "bin" / "busybox"
        if extracted.returncode != 0 or not busybox.is_file():
            raise ImageError(f"{debs[0].name} holds no bin/busybox: "
                             f"{extracted.stderr.strip()[-400:]}")
        one_file_image(LOCAL_PATH_HELPER_IMAGE, {"bin/busybox": (busybox.read_bytes(), 0o755)},
                       ["/bin/sh"], links={f"bin/{name}": "busybox" for name in HELPER_COMMANDS},
                       env={"PATH": "/bin"})
        say(f"  image: {LOCAL_PATH_HELPER_IMAGE} ({debs[0].name})")
    return LOCAL_PATH_HELPER_IMAGE
