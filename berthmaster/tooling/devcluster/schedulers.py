"""Schedulers run beside each other on one control plane, for comparisons with kube-scheduler.

Shared by the benchmark (``bench/bench_scheduler.py``) and the differential test against
kube-scheduler (``tests/integration/scheduler/test_sched_differential.py``), so both start
kube-scheduler the same way and give berthmaster the same policy:

- :func:`comparison_policy`: the default Policy (scheduler/data/default-policy.json, see
  docs/engine.md) plus ``PodTopologySpread`` (that default predates topology spread;
  kube-scheduler's default profile enforces it);
- :func:`kube_scheduler_config` / :func:`start_kube_scheduler`: the locally built
  kube-scheduler with its default profile under a given ``schedulerName``, no leader election,
  no serving port, and a log file beside its config.

Processes are plain ``subprocess.Popen`` handles (:class:`Proc`); stopping one is SIGTERM, then
SIGKILL after 10 s.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from berthmaster.tooling.processes import terminate

DEFAULT_QPS, DEFAULT_BURST = 50, 100


@dataclass
class Proc:
    """A scheduler process and its log file."""

    popen: subprocess.Popen[bytes]
    log: Path

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        return self._status_mib("VmHWM:")

    def rss_mib(self) -> float:
        return self._status_mib("VmRSS:")

    def _status_mib(self, field: str) -> float:
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return 0.0

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        terminate(self.popen)


def comparison_policy() -> dict[str, Any]:
    """The default Policy with PodTopologySpread (filter and score) added."""
    text = (resources.files("berthmaster.scheduler") / "data" / "default-policy.json") \
        .read_text(encoding="utf-8")
    policy: dict[str, Any] = json.loads(text)
    policy["predicates"].append({"name": "PodTopologySpread"})
    policy["priorities"].append({"name": "EvenPodsSpreadPriority", "weight": 1})
    return policy


def kube_scheduler_config(kubeconfig: str, scheduler_name: str, *, qps: int = DEFAULT_QPS,
                          burst: int = DEFAULT_BURST,
                          profile: Mapping[str, Any] | None = None,
                          extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration: the default profile (plus ``profile``'s fields) named
    ``scheduler_name``; ``extra`` adds top-level fields (e.g. ``podInitialBackoffSeconds``)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name, **(profile or {})}],
        **(extra or {}),
    }


def start_kube_scheduler(binary: Path | str, config: Mapping[str, Any], workdir: Path,
                         label: str, flags: Sequence[str] = ("-v=1",)) -> Proc:
    """Start kube-scheduler with ``config`` (written to ``workdir/<label>.yaml``), logging to
    ``workdir/<label>.log``."""
    config_path = workdir / f"{label}.yaml"
    config_path.write_text(yaml.safe_dump(dict(config)))
    log = workdir / f"{label}.log"
    with log.open("wb") as handle:
        popen = subprocess.Popen([str(binary), f"--config={config_path}", "--secure-port=0",
                                  *flags], stdout=handle, stderr=subprocess.STDOUT)
    return Proc(popen, log)
