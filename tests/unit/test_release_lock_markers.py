"""hack/release.py's SBOM input: the universal lock narrowed to what the image's Python
installs. Markers are PEP 508 environment markers, evaluated as pip does at install
(pip: src/pip/_internal/req/req_install.py, ``match_markers``; packaging: markers.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

LOCK = """\
# comment at the top
aiohttp==3.13.0 \\
    --hash=sha256:aa
    # via berthmaster
typing-extensions==4.16.0 ; python_full_version < '3.13' \\
    --hash=sha256:bb \\
    --hash=sha256:cc
    # via
    #   aiohttp
cffi==2.1.1 ; platform_python_implementation != 'PyPy' \\
    --hash=sha256:dd
"""


def release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", ROOT / "hack" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_requirement_for_older_pythons_leaves_with_its_hashes_and_comments() -> None:
    module = release()
    narrowed = module.lock_for_image(LOCK, module.image_environment("3.13"))
    assert narrowed == """\
# comment at the top
aiohttp==3.13.0 \\
    --hash=sha256:aa
    # via berthmaster
cffi==2.1.1 ; platform_python_implementation != 'PyPy' \\
    --hash=sha256:dd
"""


def test_on_an_older_python_every_requirement_stays() -> None:
    module = release()
    assert module.lock_for_image(LOCK, module.image_environment("3.12")) == LOCK


def test_the_image_python_is_the_image_builders() -> None:
    from berthmaster.tooling.devcluster.images import PYTHON_VERSION

    assert release().IMAGE_PYTHON == PYTHON_VERSION
