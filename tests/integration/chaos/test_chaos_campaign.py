"""The short fault campaign (``bench/chaos.py --minutes 3``): every fault kind fires at least
once, and no invariant is breached.

The campaign starts its own control plane (it restarts kube-apiserver and etcd, which the test
session's shared cluster must not suffer), runs as a subprocess, and is judged by its last line
(``invariant breaches: N | ... | faults kind=n ...``) and exit code. Kept small (five static
nodes, two MachineSets of at most three Machines, at most 24 live workload objects, one write
every 1.5 s) so it holds on a loaded 2-core machine; the long run is ``--minutes 30``.

A soak by nature (minutes of wall-clock faults on a control plane of its own), it is marked
``long``: ``make test-long`` runs it, and CI runs that right after ``make test``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from berthmaster.tooling.chaos.campaign import FAULTS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module", autouse=True)
def leave_nodes_as_found() -> None:
    """Overrides the integration folder's fixture of that name, which needs the session's
    shared control plane: the campaign brings its own, and must not start a second."""


# Five minutes on an idle machine, up to three times that on a loaded one: beyond the suite's
# default 300 s (the campaign's own start-up waits are bounded; the subprocess is stopped at 20).
@pytest.mark.long
@pytest.mark.timeout(1500)
def test_a_short_campaign_breaches_nothing_and_fires_every_fault(tmp_path: Path) -> None:
    log = tmp_path / "chaos.log"
    with log.open("wb") as sink:
        result = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "chaos.py"), "--minutes", "3", "--seed", "1"],
            stdout=sink, stderr=subprocess.STDOUT, cwd=str(ROOT), timeout=1200,
            env={**os.environ})
    output = log.read_text(errors="replace")
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines, "the campaign printed nothing"
    last = lines[-1]
    assert last.startswith("invariant breaches: "), output[-6000:]
    assert last.startswith("invariant breaches: 0 "), output[-6000:]
    assert result.returncode == 0, output[-6000:]
    fired = dict(re.findall(r"(\S+)=(\d+)", last.split("| faults ")[1].split(" | ")[0]))
    assert {kind for kind, count in fired.items() if int(count) >= 1} == set(FAULTS), last
