"""The tooling finds the checkout's files from its own location (berthmaster/tooling/), not
from the working directory: the demo's samples and CRDs, the campaign's hooks and policies,
the Go wrapper modules in hack/."""

from __future__ import annotations

from pathlib import Path

import pytest

from berthmaster.tooling import demo, demo_machines
from berthmaster.tooling.chaos import campaign
from berthmaster.tooling.devcluster import paths

REPO = Path(__file__).resolve().parents[3]


def test_the_tooling_roots_are_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    assert campaign.ROOT == REPO
    assert demo.SAMPLES.is_file()
    assert (demo_machines.DEPLOY / "crds").is_dir()
    monkeypatch.chdir(tmp_path)  # the working directory's hack/ is only a fallback
    monkeypatch.delenv("BERTHMASTER_HACK_DIR", raising=False)
    assert paths.hack_dir() == REPO / "hack"
