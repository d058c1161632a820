"""What the image is built from: the Dockerfile's build stage, the dependency locks, the local
Debian base's recipe. No Docker needed; `make e2e` builds the image itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from berthmaster.tooling.devcluster import images

ROOT = Path(__file__).resolve().parents[3]


def stage_env(dockerfile: str, stage: str) -> dict[str, str]:
    """The ENV a named stage of a Dockerfile sets (``ENV K=V ...`` with continuations)."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    env: dict[str, str] = {}
    current = None
    for line in joined.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].upper() == "FROM":
            current = words[-1] if len(words) >= 4 and words[-2].upper() == "AS" else None
        elif words[0].upper() == "ENV" and current == stage:
            env.update(word.split("=", 1) for word in words[1:] if "=" in word)
    return env


def test_stage_env_reads_continued_env_lines() -> None:
    text = "FROM x AS build\nENV A=1 \\\n    B=2\nFROM x\nENV C=3\n"
    assert stage_env(text, "build") == {"A": "1", "B": "2"}


def test_python_m_in_the_build_stage_does_not_import_our_operator_package(tmp_path: Path
                                                                          ) -> None:
    """The build stage runs ``python3 -m venv`` in /src, which holds operator/. Python puts the
    working directory first on sys.path for ``-m``, so /src/operator shadowed the standard
    library's operator and the build failed with ``ImportError: cannot import name 'eq' from
    'operator'``. Reproduced here: the same command, in a folder holding our operator/
    package, with only the environment the build stage declares. ``-S`` (no site import)
    because Debian's interpreter, unlike some others, has not imported ``operator`` by the time
    ``-m`` resolves the module; with site's imports the shadowing would go unseen."""
    shutil.copytree(ROOT / "operator", tmp_path / "operator",
                    ignore=shutil.ignore_patterns("__pycache__"))
    declared = stage_env((ROOT / "Dockerfile").read_text(), "build")
    env = {"PATH": os.environ["PATH"], **declared}
    result = subprocess.run([sys.executable, "-S", "-m", "venv", "--without-pip", "venv"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-800:]


def locked(lock: Path) -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", lock.read_text(), flags=re.M)
    return {canonicalize_name(name): version for name, version in pins}


def test_every_dependency_is_locked_with_hashes_at_a_version_pyproject_allows() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = ROOT / "hack" / "image" / "requirements.lock"
    pins = locked(lock)
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in {lock.name}: run hack/image/lock.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{lock.name} pins {name}=={pins[name]}, pyproject.toml asks {requirement.specifier}:"
            " run hack/image/lock.sh")
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", lock.read_text())
    assert all("--hash=sha256:" in block for block in blocks[1:])


def lower_bound(requirement: Requirement) -> Version | None:
    """The highest ``>=``, ``==`` or ``~=`` version a requirement's specifier names."""
    bounds = [Version(spec.version) for spec in requirement.specifier
              if spec.operator in (">=", "==", "~=")]
    return max(bounds, default=None)


def test_lower_bound_reads_the_floor_of_a_specifier() -> None:
    assert lower_bound(Requirement("kopf>=1.45.2,<2")) == Version("1.45.2")
    assert lower_bound(Requirement("shtab<2")) is None


def runtime_requirements() -> list[Requirement]:
    """What an installation of berthmaster runs with: its dependencies and the AWS provider's
    extra (the test extra is the tests' own)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in
            [*project["dependencies"], *project["optional-dependencies"]["aws"]]]


def test_no_runtime_lower_bound_is_older_than_the_locked_version_the_tests_run() -> None:
    """pyproject.toml promises what it may not have tested unless its lower bounds are the
    versions the tests install (hack/venv.sh installs requirements-test.lock): a bound below the
    locked version's major.minor claims releases nothing here ever ran. Raise the bound when the
    lock moves (hack/image/lock.sh)."""
    lock = ROOT / "hack" / "image" / "requirements-test.lock"
    pins = locked(lock)
    too_low = []
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in {lock.name}: run hack/image/lock.sh"
        tested = Version(pins[name])
        floor = lower_bound(requirement)
        if floor is None or floor < Version(f"{tested.major}.{tested.minor}"):
            too_low.append(f"{requirement} (the tests run {name}=={tested})")
    assert not too_low, ("pyproject.toml declares lower bounds older than what is tested; "
                         "raise them to the locked versions: " + "; ".join(too_low))


def test_the_test_venv_and_the_image_install_the_same_runtime_versions() -> None:
    """The image's lock is the runtime part of the test lock at the same versions
    (hack/image/lock.sh), so the tests run what the image ships."""
    image = locked(ROOT / "hack" / "image" / "requirements.lock")
    tests = locked(ROOT / "hack" / "image" / "requirements-test.lock")
    assert {name: tests.get(name) for name in image} == image


def test_the_build_locks_pin_what_builds_our_wheel() -> None:
    system = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    pins = locked(ROOT / "hack" / "image" / "requirements-build.lock")
    for text in system["requires"]:
        requirement = Requirement(text)
        assert requirement.specifier.contains(pins[canonicalize_name(requirement.name)])


@pytest.mark.parametrize(("text", "mirror"), [
    ("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n",
     "http://mirror.example/debian"),
    ("Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"
     "\nTypes: deb\nURIs: http://deb.debian.org/debian/\n", "http://deb.debian.org/debian"),
    ("deb [signed-by=/k.gpg] http://ftp.example/debian bookworm main\n",
     "http://ftp.example/debian"),
    ("# nothing\n", None),
])
def test_the_local_base_uses_the_machines_debian_mirror(text: str, mirror: str | None) -> None:
    assert images.mirror_from_sources(text) == mirror


def test_a_changed_base_recipe_gets_a_new_tag() -> None:
    assert images.local_base_tag() == images.local_base_tag()
    assert images.local_base_tag() != images.local_base_tag(packages=("python3",))
    assert images.local_base_tag().startswith("berthmaster.local/python-base:3.13-trixie-")
