"""The declared lower bound of every runtime dependency (pyproject.toml) is the major.minor of
the version the image's lock pins (hack/image/requirements.lock, which `make e2e` runs in the
image): a bound below it would claim versions nothing tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]


def _locked() -> dict[str, Version]:
    text = (ROOT / "hack" / "image" / "requirements.lock").read_text()
    return {canonicalize_name(name): Version(version)
            for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


def test_every_lower_bound_is_the_locked_major_minor() -> None:
    locked = _locked()
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wrong = []
    for line in declared:
        requirement = Requirement(line)
        pin = locked[canonicalize_name(requirement.name)]
        lower = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        if not lower or lower[0].release[:2] != pin.release[:2]:
            wrong.append(f"{line}: the lock pins {pin}")
        assert pin in requirement.specifier, f"{line} refuses the locked {pin}"
    assert not wrong, "raise the bounds to the lock's major.minor: " + "; ".join(wrong)
