"""The README's first command works: `berthmaster demo` on a cluster of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from berthmaster.devcluster.cluster import RunningCluster


def test_demo_places_the_samples_and_runs_the_machine_story(cluster: RunningCluster,
                                                             tmp_path: Path) -> None:
    # `cluster` ensures the binaries are built; the demo starts its own cluster beside it.
    script = str(Path(sys.executable).parent / "berthmaster")
    env = dict(os.environ, BERTHMASTER_STATE=str(tmp_path), PYTHONSAFEPATH="1")
    try:
        demo = subprocess.run([script, "demo", "--name", "demo"], capture_output=True,
                              text=True, env=env, timeout=400)
        output = demo.stdout
        assert demo.returncode == 0, demo.stderr + output
        lines = {line.split()[0]: line for line in output.splitlines()
                 if line.startswith("  ") and line.split()}
        # Where the rules say the pods must go (the scheduler decides, the API server tells).
        assert "dedicated-1" in lines["team-job"]
        assert "special-1" in lines["trainer"]
        assert "worker-c" in lines["db"]
        assert "worker-c" in lines["cache"]
        web_nodes = {lines[f"web-{i}"].rsplit(" to ", 1)[-1] for i in (1, 2, 3)}
        assert len(web_nodes) == 3, web_nodes
        assert "FailedScheduling: 0/5 nodes are available" in lines["no-toleration"]
        assert "Preempted: Preempted by pod" in lines["filler"]
        assert "dedicated-1" in lines["urgent"]
        assert "not berthmaster's pod" in lines["elsewhere"]
        assert "2/2 Machines Running" in output
        assert "Drainable=False reason HookPresent" in output
        assert "Machine gone" in output
        assert "has been remediated by requesting to delete Machine object" in output
        assert "expectedMachines 2, currentHealthy 2" in output
        # The placement admission webhook turns a plain pod into a dedicated-node one.
        assert ("admitted with toleration dedicated=groupName:NoSchedule, nodeSelector "
                "dedicated=groupName") in output
        assert "-> placed on dedicated-1" in output
    finally:
        down = subprocess.run([script, "dev", "--name", "demo", "down"], capture_output=True,
                              text=True, env=env, timeout=120)
        assert down.returncode == 0, down.stderr
    assert "berthmaster-scheduler" in down.stdout and "berthmaster-operator" in down.stdout
    assert "berthmaster-admission" in down.stdout
