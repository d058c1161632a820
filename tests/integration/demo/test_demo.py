"""The README's first command works: `berthmaster demo` on a cluster of its own.

Where the host can run a real node (CI runs as root with containerd, runc and the CNI plugins;
the kubelet is built here when missing, as the kubelet provider's tests do), the demo's real
Machine must appear, run a pod, and go with ``berthmaster dev down``; elsewhere the demo says
why, in the provider's words. Upstream: machine-api-operator pkg/controller/machine/
controller.go (a Machine's phase goes Running once its instance exists and its Node is linked).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from berthmaster.tooling import kubelet_provider as kubelet
from berthmaster.tooling.devcluster import build
from berthmaster.tooling.devcluster.cluster import RunningCluster


@pytest.fixture
def short_state() -> Iterator[Path]:
    """The demo's state folder, short enough for the real node's Unix sockets inside it
    (host_nodes.root_problem); pytest's tmp_path is not."""
    state = Path(tempfile.mkdtemp(prefix="bm-demo-"))
    try:
        yield state
    finally:
        shutil.rmtree(state, ignore_errors=True)


def processes_under(folder: Path) -> str:
    """Every process whose command line names ``folder`` (kubelets, containerds, shims, the
    demo's scheduler and operator)."""
    found = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True)
    return found.stdout.strip()


def test_demo_places_the_samples_and_runs_the_machine_story(cluster: RunningCluster,
                                                             short_state: Path) -> None:
    # `cluster` ensures the binaries are built; the demo starts its own cluster beside it.
    if os.geteuid() == 0 and build.missing_binaries(("kubelet",)):
        build.build_node()
    real_node_problems = kubelet.host_problems(short_state / "demo" / "kubelet-machines")
    script = str(Path(sys.executable).parent / "berthmaster")
    env = dict(os.environ, BERTHMASTER_STATE=str(short_state))
    try:
        demo = subprocess.run([script, "demo", "--name", "demo"], capture_output=True,
                              text=True, env=env, timeout=600)
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
        if real_node_problems:
            assert ("A real node: skipped, this host cannot run one: "
                    + "; ".join(real_node_problems)) in output
        else:
            assert "Machine demo-real (KubeletMachineProviderSpec): Node demo-real Ready" \
                in output
            assert ("pod on-real-node placed by the berthmaster scheduler on demo-real, "
                    "Running") in output
            shown = [line.split() for line in output.splitlines()]
            assert any(row[:2] == ["node/demo-real", "Ready"] for row in shown), output
            assert any(row[:2] == ["machine.machine.openshift.io/demo-real", "Running"]
                       for row in shown), output
            # Beside the kwok ones, in the same listing.
            assert any(row[0].startswith("machine.machine.openshift.io/demo-workers-")
                       and row[1] == "Running" for row in shown if len(row) > 1), output
    finally:
        down = subprocess.run([script, "dev", "--name", "demo", "down"], capture_output=True,
                              text=True, env=env, timeout=120)
        assert down.returncode == 0, down.stderr
    assert "berthmaster-scheduler" in down.stdout and "berthmaster-operator" in down.stdout
    assert "berthmaster-admission" in down.stdout
    if not real_node_problems:
        assert "real node demo-real" in down.stdout
    assert processes_under(short_state) == ""
